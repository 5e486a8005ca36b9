# A static node of a node group at Deckhouse's addresses inside module.node: one port per
# network of its instance class (no security groups on networksWithSecurityDisabled), its root
# volume (when rootDiskSize is set), the server, and a floating IP per floatingIPPools entry.

variable "prefix" {
  description = "The cluster prefix (security group name, name stem)."
  type        = string
}

variable "node_group_name" {
  description = "The node group."
  type        = string
}

variable "node_index" {
  description = "Index of the node within the group."
  type        = number
}

variable "node_group" {
  description = "The node group as cluster-config normalises it."
  type = object({
    zones                      = list(string)
    volume_type_map            = map(string)
    flavor_name                = string
    image_name                 = string
    root_disk_size             = number
    config_drive               = bool
    main_network               = string
    additional_networks        = list(string)
    networks_without_security  = list(string)
    floating_ip_pools          = list(string)
    additional_security_groups = list(string)
    metadata                   = map(string)
  })
}

variable "available_zones" {
  description = "Zones the cluster may use."
  type        = list(string)
}

variable "port_security" {
  description = "Whether the layout filters ports at all (its security group exists)."
  type        = bool
}

variable "pod_subnet_cidr" {
  description = "The pod network, an allowed address pair on filtered ports of the cluster's own network."
  type        = string
}

variable "cloud_config" {
  description = "Base64 cloud-init user data."
  type        = string
}

variable "keypair_name" {
  description = "Nova keypair of the cluster."
  type        = string
}

locals {
  name     = "${var.prefix}-${var.node_group_name}-${var.node_index}"
  zones    = length(var.node_group.zones) > 0 ? sort(setintersection(var.node_group.zones, var.available_zones)) : sort(var.available_zones)
  zone     = element(local.zones, var.node_index)
  networks = concat([var.node_group.main_network], var.node_group.additional_networks)
  # The cluster's group (when the layout has one) and the instance class's extra groups.
  security_group_names = concat(var.port_security ? [var.prefix] : [], var.node_group.additional_security_groups)
  volume_type          = lookup(var.node_group.volume_type_map, local.zone, null)
}

data "openstack_networking_network_v2" "network" {
  count = length(local.networks)
  name  = local.networks[count.index]
}

data "openstack_networking_secgroup_v2" "groups" {
  for_each = toset(local.security_group_names)
  name     = each.value
}

data "openstack_images_image_v2" "image" {
  name        = var.node_group.image_name
  most_recent = true
}

resource "openstack_networking_port_v2" "port" {
  count              = length(local.networks)
  name               = local.name
  network_id         = data.openstack_networking_network_v2.network[count.index].id
  admin_state_up     = true
  security_group_ids = contains(var.node_group.networks_without_security, local.networks[count.index]) ? [] : [for n in local.security_group_names : data.openstack_networking_secgroup_v2.groups[n].id]

  dynamic "allowed_address_pairs" {
    for_each = var.port_security && local.networks[count.index] == var.prefix ? [var.pod_subnet_cidr] : []
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

resource "openstack_blockstorage_volume_v3" "volume" {
  count                = var.node_group.root_disk_size == null ? 0 : 1
  name                 = local.name
  size                 = var.node_group.root_disk_size
  image_id             = data.openstack_images_image_v2.image.id
  volume_type          = local.volume_type
  availability_zone    = local.zone
  metadata             = var.node_group.metadata
  enable_online_resize = true

  lifecycle {
    ignore_changes = [metadata, availability_zone, image_id]
  }
}

resource "openstack_compute_instance_v2" "node" {
  name              = local.name
  image_name        = data.openstack_images_image_v2.image.name
  flavor_name       = var.node_group.flavor_name
  key_pair          = var.keypair_name
  config_drive      = var.node_group.config_drive
  availability_zone = local.zone
  user_data         = var.cloud_config == "" ? null : base64decode(var.cloud_config)
  metadata          = var.node_group.metadata

  dynamic "block_device" {
    for_each = openstack_blockstorage_volume_v3.volume
    content {
      uuid                  = block_device.value.id
      source_type           = "volume"
      destination_type      = "volume"
      boot_index            = 0
      delete_on_termination = true
    }
  }

  dynamic "network" {
    for_each = openstack_networking_port_v2.port
    content {
      port = network.value.id
    }
  }

  lifecycle {
    ignore_changes = [user_data]
  }
}

resource "openstack_compute_floatingip_v2" "floating_ip" {
  count = length(var.node_group.floating_ip_pools)
  pool  = var.node_group.floating_ip_pools[count.index]
}

resource "openstack_compute_floatingip_associate_v2" "node" {
  count                 = length(var.node_group.floating_ip_pools)
  floating_ip           = openstack_compute_floatingip_v2.floating_ip[count.index].address
  instance_id           = openstack_compute_instance_v2.node.id
  wait_until_associated = true

  lifecycle {
    ignore_changes = [wait_until_associated]
  }
}

output "node_internal_ip_address" {
  description = "The node's address on its main network."
  value       = openstack_compute_instance_v2.node.access_ip_v4
}

output "ports" {
  description = "The node's ports by network: whether security groups filter it."
  # An unfiltered port plans its security_group_ids as null.
  value = { for i, n in local.networks : n => try(length(openstack_networking_port_v2.port[i].security_group_ids), 0) > 0 }
}

output "floating_ip_pools" {
  description = "Pools of the node's floating IPs (empty for none)."
  value       = openstack_compute_floatingip_v2.floating_ip[*].pool
}

output "zone" {
  description = "The node's zone."
  value       = local.zone
}
