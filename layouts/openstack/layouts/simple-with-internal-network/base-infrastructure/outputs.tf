output "cloud_discovery_data" {
  description = "Discovery data dhctl stores for the cloud-data-discoverer and the CCM."
  value = {
    apiVersion           = "deckhouse.io/v1"
    kind                 = "OpenStackCloudDiscoveryData"
    layout               = module.config.layout
    internalNetworkNames = [data.openstack_networking_network_v2.internal.name]
    externalNetworkNames = data.openstack_networking_network_v2.external[*].name
    podNetworkMode       = local.net.pod_network_mode
    zones                = local.zones
    instances = {
      sshKeyPairName = module.base.keypair_name
      imageName      = module.config.master.image_name
      mainNetwork    = data.openstack_networking_network_v2.internal.name
    }
    # Deckhouse's schema wants no empty floatingNetworkID: left out without an external network.
    loadBalancer = merge(
      { subnetID = data.openstack_networking_subnet_v2.internal.id },
      { for n in data.openstack_networking_network_v2.external : "floatingNetworkID" => n.id },
    )
  }
}

output "node_network_cidr" {
  description = "The internal subnet the nodes join."
  value       = data.openstack_networking_subnet_v2.internal.cidr
}

output "master_server_group_id" {
  description = "The masters' anti-affinity server group (pass to master-node as masterServerGroupID)."
  value       = module.base.master_server_group_id
}
