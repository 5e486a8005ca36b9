# SimpleWithInternalNetwork: nodes join an existing internal subnet (internalSubnetName); the
# keypair, the security group (with port security) and optional master anti-affinity are
# created. Masters get a floating IP from externalNetworkName when masterWithExternalFloatingIP.

data "openstack_networking_subnet_v2" "internal" {
  name = local.net.internal_subnet_name
}

data "openstack_networking_network_v2" "internal" {
  network_id = data.openstack_networking_subnet_v2.internal.network_id
}

data "openstack_networking_network_v2" "external" {
  count = local.net.external_network_name == "" ? 0 : 1
  name  = local.net.external_network_name
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
