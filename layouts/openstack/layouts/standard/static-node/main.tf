# A static node of providerClusterConfiguration.nodeGroups[nodeGroupName].

module "node" {
  source          = "../../../terraform-modules/static-node"
  prefix          = local.prefix
  node_group_name = var.nodeGroupName
  node_index      = var.nodeIndex
  node_group      = module.config.node_groups[var.nodeGroupName]
  available_zones = local.zones
  port_security   = local.net.port_security
  pod_subnet_cidr = module.config.pod_subnet_cidr
  cloud_config    = var.cloudConfig
  keypair_name    = local.prefix
}
