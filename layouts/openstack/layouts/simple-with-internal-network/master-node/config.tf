module "config" {
  source                       = "../../../terraform-modules/cluster-config"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
  masterServerGroupID          = var.masterServerGroupID
}

data "openstack_compute_availability_zones_v2" "zones" {}

locals {
  prefix = module.config.prefix
  net    = module.config.network
  # The configured zones that exist, else every zone of the region.
  zones = sort(length(module.config.zones) > 0 ? setintersection(data.openstack_compute_availability_zones_v2.zones.names, module.config.zones) : data.openstack_compute_availability_zones_v2.zones.names)
}
