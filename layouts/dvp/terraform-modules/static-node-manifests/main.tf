# The parent-cluster objects of static node nodeIndex of node group nodeGroupName, rendered
# without a provider (the static-node layout applies them). Zones as Deckhouse picks them (the
# zone is part of the VM's name): the group's zones the cluster lists, sorted; none unless the
# cluster lists zones.

locals {
  group = module.config.node_groups[var.nodeGroupName]
  zones = sort(setintersection(module.config.zones, length(local.group.zones) > 0 ? local.group.zones : module.config.zones))
  ips   = local.group.instanceClass.virtualMachine.ipAddresses
}

variable "allocated_ip_address" {
  description = "The address the parent cluster allocated to the node's VirtualMachineIPAddress (its status.address; the layout reads it back): part of the VM's name, as in Deckhouse's layout. Null while not known."
  type        = string
  default     = null
}

module "node" {
  source               = "../node-manifests"
  prefix               = module.config.prefix
  node_index           = var.nodeIndex
  ssh_public_key       = module.config.ssh_public_key
  allocated_ip_address = var.allocated_ip_address
  tolerations_given    = try([for ng in var.providerClusterConfiguration.nodeGroups : try(ng.instanceClass.virtualMachine.tolerations, null) if ng.name == var.nodeGroupName][0], null) != null
  name                 = "${module.config.prefix}-${var.nodeGroupName}-${var.nodeIndex}"
  namespace            = module.config.namespace
  node_group           = var.nodeGroupName
  cluster_labels       = module.config.cluster_labels
  vm_labels            = module.config.vm_labels
  region               = module.config.region
  zone                 = length(local.zones) > 0 ? element(local.zones, var.nodeIndex) : null
  ip_address           = var.nodeIndex < length(local.ips) ? local.ips[var.nodeIndex] : "Auto"
  cloud_config         = var.cloudConfig
  virtual_machine      = local.group.instanceClass.virtualMachine
  root_disk            = local.group.instanceClass.rootDisk
  additional_disks     = local.group.instanceClass.additionalDisks
}
