output "node_internal_ip_address" {
  description = "The node's private address."
  value       = module.node.private_ip
}
