output "master_ip_address_for_ssh" {
  description = "Where dhctl reaches the master over SSH."
  value       = module.master.master_ip_address_for_ssh
}

output "node_internal_ip_address" {
  description = "The master's address on the node network."
  value       = module.master.node_internal_ip_address
}

output "kubernetes_data_device_path" {
  description = "Device of the etcd data volume."
  value       = module.master.kubernetes_data_device_path
}
