# The parent-cluster objects of master number nodeIndex, rendered without a provider (the
# master-node layout applies them). Zones and static IP addresses are taken by index. Zones as
# Deckhouse picks them (the zone is part of the VM's name): the group's zones the cluster lists,
# sorted; none unless the cluster lists zones.

locals {
  master = module.config.master
  zones  = sort(setintersection(module.config.zones, length(local.master.zones) > 0 ? local.master.zones : module.config.zones))
  ips    = local.master.instanceClass.virtualMachine.ipAddresses
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
  tolerations_given    = try(var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine.tolerations, null) != null
  name                 = "${module.config.prefix}-master-${var.nodeIndex}"
  namespace            = module.config.namespace
  node_group           = "master"
  cluster_labels       = module.config.cluster_labels
  vm_labels            = module.config.vm_labels
  region               = module.config.region
  instance_labels      = local.master.instanceClass.additionalLabels
  zone                 = length(local.zones) > 0 ? element(local.zones, var.nodeIndex) : null
  ip_address           = var.nodeIndex < length(local.ips) ? local.ips[var.nodeIndex] : "Auto"
  cloud_config         = var.cloudConfig
  virtual_machine      = local.master.instanceClass.virtualMachine
  root_disk            = local.master.instanceClass.rootDisk
  etcd_disk            = local.master.instanceClass.etcdDisk
  additional_disks     = local.master.instanceClass.additionalDisks
}
