# A master at Deckhouse's addresses: its ports on the layout's networks (filtered or not, as the
# layout's port security says), and module.master with the server, its volumes, its server group
# and its floating IP. moved.tf takes over the addresses of Deckhouse's own layout.

locals {
  name         = "${local.prefix}-master-${var.nodeIndex}"
  master_zones = sort(setintersection(keys(module.config.master.volume_type_map), local.zones))
  zone         = element(local.master_zones, var.nodeIndex)
  # The cluster's group where the layout has one, then the instance class's extra groups.
  security_group_names = concat(local.net.port_security ? [local.prefix] : [], module.config.master.additional_security_groups)
  security_group_ids   = [for n in local.security_group_names : data.openstack_networking_secgroup_v2.groups[n].id]
}

data "openstack_networking_secgroup_v2" "groups" {
  for_each = toset(local.security_group_names)
  name     = each.value
}

data "openstack_networking_subnet_v2" "internal" {
  name = local.net.internal_subnet_name
}

data "openstack_networking_network_v2" "internal" {
  network_id = data.openstack_networking_subnet_v2.internal.network_id
}

resource "openstack_networking_port_v2" "master_internal_with_security" {
  count              = local.net.port_security ? 1 : 0
  name               = local.name
  network_id         = data.openstack_networking_network_v2.internal.id
  admin_state_up     = true
  security_group_ids = local.security_group_ids

  fixed_ip {
    subnet_id = data.openstack_networking_subnet_v2.internal.id
  }

  allowed_address_pairs {
    ip_address = module.config.pod_subnet_cidr
  }
}

resource "openstack_networking_port_v2" "master_internal_without_security" {
  count              = local.net.port_security ? 0 : 1
  name               = local.name
  network_id         = data.openstack_networking_network_v2.internal.id
  admin_state_up     = true
  security_group_ids = local.security_group_ids

  fixed_ip {
    subnet_id = data.openstack_networking_subnet_v2.internal.id
  }
}

module "master" {
  source            = "../../../terraform-modules/master"
  prefix            = local.prefix
  node_index        = var.nodeIndex
  cloud_config      = var.cloudConfig
  flavor_name       = module.config.master.flavor_name
  image_name        = module.config.master.image_name
  root_disk_size    = module.config.master.root_disk_size
  zone              = local.zone
  volume_type       = module.config.master.volume_type_map[local.zone]
  etcd_disk_size_gb = module.config.master.etcd_disk_size_gb
  keypair_name      = local.prefix
  port_ids          = concat(openstack_networking_port_v2.master_internal_with_security[*].id, openstack_networking_port_v2.master_internal_without_security[*].id)
  config_drive      = local.net.master_config_drive
  floating_ip_pool  = local.net.master_floating_ip ? local.net.external_network_name : ""
  metadata          = merge(module.config.metadata, module.config.master.metadata)
  server_group = {
    policy = module.config.master.server_group_policy
    # A shared group from base-infrastructure (masterServerGroupID), else the manually managed
    # one; empty makes module.master create the group as Deckhouse does.
    id = module.config.master.anti_affinity ? var.masterServerGroupID : module.config.master.server_group_id
  }
}
