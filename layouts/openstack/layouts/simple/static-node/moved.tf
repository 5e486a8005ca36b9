# Takes over a static node built by Deckhouse's layout, which declares it in the root module.

moved {
  from = openstack_networking_port_v2.port
  to   = module.node.openstack_networking_port_v2.port
}

moved {
  from = openstack_blockstorage_volume_v3.volume
  to   = module.node.openstack_blockstorage_volume_v3.volume
}

moved {
  from = openstack_compute_instance_v2.node
  to   = module.node.openstack_compute_instance_v2.node
}

moved {
  from = openstack_compute_floatingip_v2.floating_ip
  to   = module.node.openstack_compute_floatingip_v2.floating_ip
}

moved {
  from = openstack_compute_floatingip_associate_v2.node
  to   = module.node.openstack_compute_floatingip_associate_v2.node
}
