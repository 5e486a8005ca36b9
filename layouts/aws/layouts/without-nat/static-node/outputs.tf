output "node_internal_ip_address" {
  description = "The node's private address."
  value       = module.static-node.private_ip
}
