module "config" {
  source                       = "../../../terraform-modules/cluster-config"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
}

data "aws_availability_zones" "available" {
  state = "available"
}

locals {
  prefix = module.config.prefix
  # The configured zones, else the region's first 4 (one subnet slot each).
  zones = sort(length(module.config.zones) > 0 ? module.config.zones : slice(sort(data.aws_availability_zones.available.names), 0, min(4, length(data.aws_availability_zones.available.names))))
}
