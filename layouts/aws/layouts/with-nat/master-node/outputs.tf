output "master_ip_address_for_ssh" {
  description = "Where dhctl reaches the master over SSH (its Elastic IP; WithNAT its private address, through the bastion)."
  value       = module.master-node.ip_for_ssh
}

output "node_internal_ip_address" {
  description = "The master's private address."
  value       = module.master-node.private_ip
}

output "kubernetes_data_device_path" {
  description = "Device name of the etcd volume."
  value       = module.master-node.kubernetes_data_device_path
}
