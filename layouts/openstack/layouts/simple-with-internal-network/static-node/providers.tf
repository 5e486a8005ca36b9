provider "openstack" {
  auth_url    = var.providerClusterConfiguration.provider.authURL
  cacert_file = var.providerClusterConfiguration.provider.caCert == "" ? null : var.providerClusterConfiguration.provider.caCert
  domain_name = var.providerClusterConfiguration.provider.domainName
  tenant_name = var.providerClusterConfiguration.provider.tenantName
  tenant_id   = var.providerClusterConfiguration.provider.tenantID
  user_name   = var.providerClusterConfiguration.provider.username
  password    = var.providerClusterConfiguration.provider.password
  region      = var.providerClusterConfiguration.provider.region
}
