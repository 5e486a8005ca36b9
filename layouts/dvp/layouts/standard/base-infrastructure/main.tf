# DVP Standard base infrastructure: the isolating NetworkPolicy (networkPolicy Isolated).

module "render" {
  source                       = "../../../terraform-modules/base-manifests"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
}

resource "kubernetes_manifest" "network_policy" {
  count    = module.render.network_policy == null ? 0 : 1
  manifest = module.render.network_policy
}
