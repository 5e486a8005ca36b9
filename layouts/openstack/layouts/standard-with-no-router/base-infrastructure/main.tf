# StandardWithNoRouter: an internal network without a gateway (nodes reach the outside through
# their second port on the external network), the keypair, the security group and optional
# master anti-affinity. Load balancers get no floating IPs.

data "openstack_networking_network_v2" "external" {
  name = local.net.external_network_name
}

resource "openstack_networking_network_v2" "internal" {
  name           = local.net.internal_network_name
  admin_state_up = true
  tags           = [for k, v in module.config.metadata : "${k}=${v}"]
}

resource "openstack_networking_subnet_v2" "internal" {
  name       = local.net.internal_subnet_name
  network_id = openstack_networking_network_v2.internal.id
  cidr       = local.net.internal_network_cidr
  ip_version = 4
  no_gateway = true
}

module "base" {
  source         = "../../../terraform-modules/cluster-base"
  prefix         = local.prefix
  ssh_public_key = module.config.ssh_public_key
  port_security  = local.net.port_security
  allow_list     = module.config.ssh_allow_list
  anti_affinity  = module.config.master.anti_affinity
  metadata       = module.config.metadata
}
