provider "openstack" {
  auth_url    = module.config.provider.authURL
  cacert_file = module.config.provider.caCert == "" ? null : module.config.provider.caCert
  domain_name = module.config.provider.domainName
  tenant_name = module.config.provider.tenantName
  tenant_id   = module.config.provider.tenantID
  user_name   = module.config.provider.username
  password    = module.config.provider.password
  region      = module.config.provider.region
}
