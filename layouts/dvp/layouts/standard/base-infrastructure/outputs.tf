output "cloud_discovery_data" {
  description = "Discovery data dhctl stores for the cloud-data-discoverer (DVPCloudDiscoveryData)."
  value       = module.render.cloud_discovery_data
}
