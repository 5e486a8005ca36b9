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

# The bastion: a small server on the internal network with a floating IP; masters then get none.
module "bastion_port" {
  source               = "../../../terraform-modules/port"
  count                = module.config.bastion == null ? 0 : 1
  name                 = "${local.prefix}-bastion"
  network_name         = openstack_networking_network_v2.internal.name
  subnet_name          = openstack_networking_subnet_v2.internal.name
  port_security        = local.net.port_security
  security_group_names = module.base.security_group_names
  metadata             = module.config.metadata
}

data "openstack_images_image_v2" "bastion" {
  count       = module.config.bastion == null ? 0 : 1
  name        = module.config.bastion.image_name
  most_recent = true
}

resource "openstack_compute_instance_v2" "bastion" {
  count             = module.config.bastion == null ? 0 : 1
  name              = "${local.prefix}-bastion"
  flavor_name       = module.config.bastion.flavor_name
  key_pair          = module.base.keypair_name
  availability_zone = coalesce(module.config.bastion.zone, local.zones[0])
  metadata          = module.config.metadata

  block_device {
    uuid                  = data.openstack_images_image_v2.bastion[0].id
    source_type           = "image"
    destination_type      = "volume"
    boot_index            = 0
    volume_size           = module.config.bastion.root_disk_size
    volume_type           = module.config.bastion.volume_type
    delete_on_termination = true
  }

  network {
    port = module.bastion_port[0].id
  }

  depends_on = [openstack_networking_router_interface_v2.internal]
}

resource "openstack_networking_floatingip_v2" "bastion" {
  count = module.config.bastion == null ? 0 : 1
  pool  = data.openstack_networking_network_v2.external.name
}

resource "openstack_networking_floatingip_associate_v2" "bastion" {
  count       = module.config.bastion == null ? 0 : 1
  floating_ip = openstack_networking_floatingip_v2.bastion[0].address
  port_id     = module.bastion_port[0].id
}
