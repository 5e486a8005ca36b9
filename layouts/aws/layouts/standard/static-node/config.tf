module "config" {
  source                       = "../../../terraform-modules/cluster-config"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
}

data "aws_availability_zones" "available" {}

locals {
  prefix = module.config.prefix
  # Every zone of the region, in the region's order: subnet n is in zone n (as in Deckhouse).
  region_zones = data.aws_availability_zones.available.names
  # The zones nodes go to: the configured ones the region has, else all of them.
  zones = module.config.zones == null ? local.region_zones : sort(setintersection(local.region_zones, module.config.zones))
}
