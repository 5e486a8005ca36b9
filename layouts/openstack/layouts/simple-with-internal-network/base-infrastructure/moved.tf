# Takes over the base infrastructure built by Deckhouse's layout: its keypair and security group
# modules sit in module.base here.

moved {
  from = module.network_security
  to   = module.base.module.network_security
}

moved {
  from = module.keypair.openstack_compute_keypair_v2.ssh
  to   = module.base.openstack_compute_keypair_v2.ssh
}
