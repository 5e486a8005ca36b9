# Simple: nodes sit directly on the external network; only the keypair, the security group
# and optional master anti-affinity are created.

data "openstack_networking_network_v2" "external" {
  name = local.net.external_network_name
}

data "openstack_networking_subnet_v2" "external" {
  network_id = data.openstack_networking_network_v2.external.id
  ip_version = 4
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
