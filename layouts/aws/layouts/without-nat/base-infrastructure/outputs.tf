output "cloud_discovery_data" {
  description = "Discovery data dhctl stores: what node-manager needs to create nodes (subnets, profile, groups, key)."
  value = {
    apiVersion                = "deckhouse.io/v1"
    kind                      = "AWSCloudDiscoveryData"
    layout                    = module.config.layout
    region                    = module.config.region
    zones                     = local.zones
    zoneToSubnetIdMap         = module.network.zone_to_subnet_id
    keyName                   = aws_key_pair.ssh.key_name
    loadBalancerSecurityGroup = module.security_groups.cluster_group_id
    instances = {
      iamProfileName           = module.iam.node_profile
      additionalSecurityGroups = concat([module.security_groups.cluster_group_id], module.security_groups.ssh_group_ids)
      associatePublicIPAddress = !module.config.with_nat
    }
  }
}

output "node_network_cidr" {
  description = "The node network."
  value       = module.config.node_network_cidr
}

