# The parent-cluster objects of static node nodeIndex of node group nodeGroupName, rendered
# without a provider (the static-node layout applies them).

locals {
  group = module.config.node_groups[var.nodeGroupName]
  zones = length(local.group.zones) > 0 ? local.group.zones : module.config.zones
  ips   = local.group.instanceClass.virtualMachine.ipAddresses
}

module "node" {
  source           = "../node-manifests"
  name             = "${module.config.prefix}-${var.nodeGroupName}-${var.nodeIndex}"
  namespace        = module.config.namespace
  node_group       = var.nodeGroupName
  cluster_labels   = module.config.cluster_labels
  vm_labels        = module.config.vm_labels
  region           = module.config.region
  zone             = length(local.zones) > 0 ? element(local.zones, var.nodeIndex) : null
  ip_address       = var.nodeIndex < length(local.ips) ? local.ips[var.nodeIndex] : "Auto"
  cloud_config     = var.cloudConfig
  virtual_machine  = local.group.instanceClass.virtualMachine
  root_disk        = local.group.instanceClass.rootDisk
  additional_disks = local.group.instanceClass.additionalDisks
}
