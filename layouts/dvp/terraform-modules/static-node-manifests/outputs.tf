output "name" {
  description = "Name of the VirtualMachine: the node's hostname and the hash of what replaces it."
  value       = module.node.virtual_machine.metadata.name
}

output "cloud_init_secret" {
  description = "The cloud-init Secret."
  value       = module.node.cloud_init_secret
}

output "ip_address" {
  description = "The VirtualMachineIPAddress."
  value       = module.node.ip_address
}

output "disks" {
  description = "Every VirtualDisk of the node by role (root, kubernetes-data for masters, additional-N)."
  value = merge(
    { root = module.node.root_disk },
    module.node.etcd_disk == null ? {} : { "kubernetes-data" = module.node.etcd_disk },
    { for i, d in module.node.additional_disks : "additional-${i}" => d },
  )
}

output "virtual_machine" {
  description = "The VirtualMachine."
  value       = module.node.virtual_machine

  precondition {
    condition     = module.config.node_index_in_range
    error_message = "nodeIndex must be below the replicas of the node's group (masterNodeGroup.replicas or the replicas of nodeGroups[nodeGroupName])."
  }
}
