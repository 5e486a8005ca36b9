output "providerClusterConfiguration" {
  description = "The AWSClusterConfiguration typed, with Deckhouse's defaults for the fields left out."
  value       = var.providerClusterConfiguration
}
