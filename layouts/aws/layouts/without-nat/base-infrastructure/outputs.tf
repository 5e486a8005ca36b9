output "cloud_discovery_data" {
  description = "Discovery data dhctl stores (AWSCloudDiscoveryData): what node-manager and the CCM need (subnets, profile, groups, key, default AMI, the load balancers' group)."
  value = {
    apiVersion                = "deckhouse.io/v1alpha1"
    kind                      = "AWSCloudDiscoveryData"
    layout                    = module.config.layout
    region                    = module.config.region
    keyName                   = aws_key_pair.ssh.key_name
    loadBalancerSecurityGroup = module.security-groups.load_balancer_group_id == null ? "" : module.security-groups.load_balancer_group_id
    zones                     = local.zones
    zoneToSubnetIdMap         = module.config.internal_subnet ? module.network.zone_to_internal_subnet_id : module.network.zone_to_public_subnet_id
    instances = {
      ami                      = module.config.master.instanceClass.ami
      iamProfileName           = module.iam.node_profile
      additionalSecurityGroups = module.security-groups.node_group_ids
      associatePublicIPAddress = module.config.statics_public
    }
  }
}

output "node_network_cidr" {
  description = "The node network (nodeNetworkCIDR, else the VPC's CIDR)."
  value       = coalesce(module.config.node_network_cidr, module.vpc.cidr_block)
}

output "bastion_ip_address_for_ssh" {
  description = "The bastion's Elastic IP (WithNAT with a bastion), else empty."
  value       = try(module.bastion[0].ip_for_ssh, "")
}
