# Takes over a master built by Deckhouse's layout: its etcd volume lived in module.kubernetes_data.

moved {
  from = module.kubernetes_data.openstack_blockstorage_volume_v3.kubernetes_data
  to   = module.master.openstack_blockstorage_volume_v3.kubernetes_data
}

moved {
  from = module.kubernetes_data.openstack_compute_volume_attach_v2.kubernetes_data
  to   = module.master.openstack_compute_volume_attach_v2.kubernetes_data
}
