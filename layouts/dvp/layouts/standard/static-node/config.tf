module "config" {
  source                       = "../../../terraform-modules/cluster-config"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
}
