output "cloud_discovery_data" {
  description = "Discovery data dhctl stores for the cloud-data-discoverer and the CCM."
  value = {
    apiVersion           = "deckhouse.io/v1"
    kind                 = "OpenStackCloudDiscoveryData"
    layout               = module.config.layout
    internalNetworkNames = [openstack_networking_network_v2.internal.name]
    externalNetworkNames = [data.openstack_networking_network_v2.external.name]
    podNetworkMode       = local.net.pod_network_mode
    zones                = local.zones
    instances = {
      sshKeyPairName = module.base.keypair_name
      imageName      = module.config.master.image_name
      mainNetwork    = openstack_networking_network_v2.internal.name
      securityGroups = module.base.security_group_names
    }
    loadBalancer = {
      subnetID          = openstack_networking_subnet_v2.internal.id
      floatingNetworkID = data.openstack_networking_network_v2.external.id
    }
  }
}

output "node_network_cidr" {
  description = "The node network."
  value       = openstack_networking_subnet_v2.internal.cidr
}

output "bastion_ip_address_for_ssh" {
  description = "The bastion's floating IP, empty without a bastion."
  value       = try(openstack_compute_floatingip_v2.bastion[0].address, "")
}

output "master_server_group_id" {
  description = "The masters' anti-affinity server group (pass to master-node as masterServerGroupID)."
  value       = module.base.master_server_group_id
}
