output "providerClusterConfiguration" {
  description = "The DVPClusterConfiguration typed, with Deckhouse's defaults for the fields left out."
  value       = var.providerClusterConfiguration
}
