output "node_internal_ip_address" {
  description = "The node's address on its main network."
  value       = module.node.node_internal_ip_address
}
