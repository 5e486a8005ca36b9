# Normalises the cluster configuration for the layouts: one place decides names, networks,
# security and defaults, so base-infrastructure, master-node and static-node agree.

# The document typed with Deckhouse's defaults and its values checked; fields.tf refuses the fields
# the typing would drop.
module "typed" {
  source                       = "./typed"
  providerClusterConfiguration = var.providerClusterConfiguration
}

locals {
  pcc    = module.typed.providerClusterConfiguration
  prefix = var.clusterConfiguration.cloud.prefix

  standard_security  = try(local.pcc.standard.internalNetworkSecurity, true)
  no_router_security = try(local.pcc.standardWithNoRouter.internalNetworkSecurity, true)
  simple_mode        = try(local.pcc.simple.podNetworkMode, "VXLAN")
  internal_mode      = try(local.pcc.simpleWithInternalNetwork.podNetworkMode, "DirectRoutingWithPortSecurityEnabled")
  internal_external  = try(local.pcc.simpleWithInternalNetwork.externalNetworkName, null)

  # Per layout: where nodes are attached, whether their ports are filtered, how pods talk.
  networks = {
    Standard = {
      internal_network_name = local.prefix
      internal_subnet_name  = local.prefix
      internal_network_cidr = try(local.pcc.standard.internalNetworkCIDR, "")
      dns_servers           = try(local.pcc.standard.internalNetworkDNSServers, [])
      create_internal       = true
      create_router         = true
      external_network_name = try(local.pcc.standard.externalNetworkName, "")
      external_network_dhcp = true
      external_port         = false
      port_security         = local.standard_security
      pod_network_mode      = local.standard_security ? "DirectRoutingWithPortSecurityEnabled" : "DirectRouting"
      master_floating_ip    = try(local.pcc.standard.bastion, null) == null
    }
    StandardWithNoRouter = {
      internal_network_name = local.prefix
      internal_subnet_name  = local.prefix
      internal_network_cidr = try(local.pcc.standardWithNoRouter.internalNetworkCIDR, "")
      dns_servers           = []
      create_internal       = true
      create_router         = false
      external_network_name = try(local.pcc.standardWithNoRouter.externalNetworkName, "")
      external_network_dhcp = try(local.pcc.standardWithNoRouter.externalNetworkDHCP, true)
      external_port         = true
      port_security         = local.no_router_security
      pod_network_mode      = local.no_router_security ? "DirectRoutingWithPortSecurityEnabled" : "DirectRouting"
      master_floating_ip    = false
    }
    Simple = {
      internal_network_name = try(local.pcc.simple.externalNetworkName, "")
      internal_subnet_name  = ""
      internal_network_cidr = ""
      dns_servers           = []
      create_internal       = false
      create_router         = false
      external_network_name = try(local.pcc.simple.externalNetworkName, "")
      external_network_dhcp = try(local.pcc.simple.externalNetworkDHCP, true)
      external_port         = false
      port_security         = true
      pod_network_mode      = local.simple_mode
      master_floating_ip    = false
    }
    SimpleWithInternalNetwork = {
      internal_network_name = ""
      internal_subnet_name  = try(local.pcc.simpleWithInternalNetwork.internalSubnetName, "")
      internal_network_cidr = ""
      dns_servers           = []
      create_internal       = false
      create_router         = false
      external_network_name = local.internal_external == null ? "" : local.internal_external
      external_network_dhcp = try(local.pcc.simpleWithInternalNetwork.externalNetworkDHCP, true)
      external_port         = false
      port_security         = local.internal_mode == "DirectRoutingWithPortSecurityEnabled"
      pod_network_mode      = local.internal_mode
      master_floating_ip    = try(local.pcc.simpleWithInternalNetwork.masterWithExternalFloatingIP, true)
    }
  }
  network = merge(local.networks[local.pcc.layout], {
    # Servers read their network configuration from a config drive where DHCP does not give it.
    master_config_drive = local.pcc.layout == "Standard" ? false : !local.networks[local.pcc.layout].external_network_dhcp
  })

  server_group = local.pcc.masterNodeGroup.serverGroup
  master = {
    replicas                   = local.pcc.masterNodeGroup.replicas
    flavor_name                = local.pcc.masterNodeGroup.instanceClass.flavorName
    image_name                 = local.pcc.masterNodeGroup.instanceClass.imageName
    root_disk_size             = local.pcc.masterNodeGroup.instanceClass.rootDiskSize
    etcd_disk_size_gb          = local.pcc.masterNodeGroup.instanceClass.etcdDiskSizeGb
    additional_security_groups = local.pcc.masterNodeGroup.instanceClass.additionalSecurityGroups
    metadata                   = merge(local.pcc.tags, local.pcc.masterNodeGroup.instanceClass.additionalTags)
    volume_type_map            = local.pcc.masterNodeGroup.volumeTypeMap
    anti_affinity              = try(local.server_group.policy, "") == "AntiAffinity"
    server_group_policy        = try(local.server_group.policy, "")
    server_group_id            = try(local.server_group.manuallyManaged.id, "")
  }

  node_groups = {
    for ng in local.pcc.nodeGroups : ng.name => {
      replicas                   = ng.replicas
      zones                      = ng.zones
      volume_type_map            = ng.volumeTypeMap
      flavor_name                = ng.instanceClass.flavorName
      image_name                 = ng.instanceClass.imageName
      root_disk_size             = ng.instanceClass.rootDiskSize
      config_drive               = ng.instanceClass.configDrive
      main_network               = ng.instanceClass.mainNetwork
      additional_networks        = ng.instanceClass.additionalNetworks
      networks_without_security  = ng.instanceClass.networksWithSecurityDisabled
      floating_ip_pools          = ng.instanceClass.floatingIPPools
      additional_security_groups = ng.instanceClass.additionalSecurityGroups
      metadata                   = merge(local.pcc.tags, ng.instanceClass.additionalTags)
    }
  }

  bastion = try(local.pcc.standard.bastion, null) == null ? null : {
    zone           = local.pcc.standard.bastion.zone
    volume_type    = local.pcc.standard.bastion.volumeType
    flavor_name    = local.pcc.standard.bastion.instanceClass.flavorName
    image_name     = local.pcc.standard.bastion.instanceClass.imageName
    root_disk_size = local.pcc.standard.bastion.instanceClass.rootDiskSize
    metadata       = merge(local.pcc.tags, local.pcc.standard.bastion.instanceClass.additionalTags)
  }
}
