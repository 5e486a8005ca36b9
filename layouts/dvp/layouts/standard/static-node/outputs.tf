output "node_internal_ip_address" {
  description = "The node's address."
  value       = kubernetes_manifest.virtual_machine.object.status.ipAddress
}
