# The parent DVP cluster, reached through the current context of provider.kubeconfigDataBase64.
provider "kubernetes" {
  host                   = module.config.parent_connection.host
  cluster_ca_certificate = module.config.parent_connection.cluster_ca_certificate
  insecure               = module.config.parent_connection.insecure
  token                  = module.config.parent_connection.token
  client_certificate     = module.config.parent_connection.client_certificate
  client_key             = module.config.parent_connection.client_key
}
