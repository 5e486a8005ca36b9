output "cloud_discovery_data" {
  description = "Discovery data dhctl stores for the cloud-data-discoverer and the CCM."
  value = {
    apiVersion           = "deckhouse.io/v1"
    kind                 = "OpenStackCloudDiscoveryData"
    layout               = module.config.layout
    internalNetworkNames = [data.openstack_networking_network_v2.external.name]
    externalNetworkNames = [data.openstack_networking_network_v2.external.name]
    podNetworkMode       = local.net.pod_network_mode
    zones                = local.zones
    instances = {
      sshKeyPairName = module.base.keypair_name
      imageName      = module.config.master.image_name
      mainNetwork    = data.openstack_networking_network_v2.external.name
    }
  }
}

output "node_network_cidr" {
  description = "The external network's subnet, where the nodes are."
  value       = data.openstack_networking_subnet_v2.external.cidr
}

output "master_server_group_id" {
  description = "The masters' anti-affinity server group (pass to master-node as masterServerGroupID)."
  value       = module.base.master_server_group_id
}
