output "providerClusterConfiguration" {
  description = "The OpenStackClusterConfiguration typed, with Deckhouse's defaults for the fields left out."
  value       = var.providerClusterConfiguration
}
