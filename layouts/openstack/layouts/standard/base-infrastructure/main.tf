# Standard: an internal network behind a router to the external network, the cluster's
# keypair and security group, optional master anti-affinity, and an optional bastion.

data "openstack_networking_network_v2" "external" {
  name     = local.net.external_network_name
  external = true
}

resource "openstack_networking_network_v2" "internal" {
  name           = local.net.internal_network_name
  admin_state_up = true
  tags           = [for k, v in module.config.metadata : "${k}=${v}"]
}

resource "openstack_networking_subnet_v2" "internal" {
  name            = local.net.internal_subnet_name
  network_id      = openstack_networking_network_v2.internal.id
  cidr            = local.net.internal_network_cidr
  ip_version      = 4
  dns_nameservers = local.net.dns_servers
  gateway_ip      = cidrhost(local.net.internal_network_cidr, 1)
  allocation_pool {
    start = cidrhost(local.net.internal_network_cidr, 2)
    end   = cidrhost(local.net.internal_network_cidr, -2)
  }
  enable_dhcp = true
  lifecycle {
    # Deckhouse's layout ended the pool at host 254; the pool is the subnet's business after creation.
    ignore_changes = [allocation_pool]
  }
}

resource "openstack_networking_router_v2" "router" {
  name                = local.prefix
  admin_state_up      = true
  external_network_id = data.openstack_networking_network_v2.external.id
}

resource "openstack_networking_router_interface_v2" "internal" {
  router_id = openstack_networking_router_v2.router.id
  subnet_id = openstack_networking_subnet_v2.internal.id
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

# The bastion, at Deckhouse's addresses: a port on the internal network, a root volume, the
# server booted from it, and a floating IP from the external network; masters then get none.
locals {
  bastion_count = module.config.bastion == null ? 0 : 1
  bastion_name  = "${local.prefix}-bastion"
  bastion_zone  = module.config.bastion == null ? null : coalesce(module.config.bastion.zone, local.zones[0])
}

resource "openstack_networking_port_v2" "bastion" {
  count              = local.bastion_count
  name               = local.bastion_name
  network_id         = openstack_networking_network_v2.internal.id
  admin_state_up     = true
  security_group_ids = module.base.security_group_ids

  fixed_ip {
    subnet_id = openstack_networking_subnet_v2.internal.id
  }
}

data "openstack_images_image_v2" "bastion" {
  count       = local.bastion_count
  name        = module.config.bastion.image_name
  most_recent = true
}

resource "openstack_blockstorage_volume_v3" "root" {
  count                = local.bastion_count
  name                 = "${local.bastion_name}-root-volume"
  size                 = module.config.bastion.root_disk_size
  image_id             = data.openstack_images_image_v2.bastion[0].id
  volume_type          = module.config.bastion.volume_type
  availability_zone    = local.bastion_zone
  metadata             = module.config.bastion.metadata
  enable_online_resize = true

  lifecycle {
    ignore_changes = [metadata, availability_zone, image_id]
  }
}

resource "openstack_compute_instance_v2" "bastion" {
  count             = local.bastion_count
  name              = local.bastion_name
  image_name        = data.openstack_images_image_v2.bastion[0].name
  flavor_name       = module.config.bastion.flavor_name
  key_pair          = module.base.keypair_name
  config_drive      = false
  availability_zone = local.bastion_zone
  metadata          = module.config.bastion.metadata

  block_device {
    uuid                  = openstack_blockstorage_volume_v3.root[0].id
    source_type           = "volume"
    destination_type      = "volume"
    boot_index            = 0
    delete_on_termination = true
  }

  network {
    port = openstack_networking_port_v2.bastion[0].id
  }

  depends_on = [openstack_networking_router_interface_v2.internal]
}

resource "openstack_compute_floatingip_v2" "bastion" {
  count = local.bastion_count
  pool  = data.openstack_networking_network_v2.external.name
}

resource "openstack_compute_floatingip_associate_v2" "bastion" {
  count                 = local.bastion_count
  floating_ip           = openstack_compute_floatingip_v2.bastion[0].address
  instance_id           = openstack_compute_instance_v2.bastion[0].id
  wait_until_associated = true

  lifecycle {
    ignore_changes = [wait_until_associated]
  }
}
