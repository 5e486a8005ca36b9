# A static node of a node group: one port per network of its instance class (unfiltered on the
# networks listed in networksWithSecurityDisabled), the server, and a floating IP from the
# first floatingIPPools entry when there is one.

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
  description = "Whether the layout filters ports at all."
  type        = bool
}

variable "pod_subnet_cidr" {
  description = "The pod network, an allowed address pair on filtered ports."
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
  name        = "${var.prefix}-${var.node_group_name}-${var.node_index}"
  zones       = length(var.node_group.zones) > 0 ? sort(setintersection(var.node_group.zones, var.available_zones)) : sort(var.available_zones)
  zone        = element(local.zones, var.node_index)
  networks    = concat([var.node_group.main_network], var.node_group.additional_networks)
  volume_type = lookup(var.node_group.volume_type_map, local.zone, null)
}

module "ports" {
  source               = "../port"
  for_each             = { for i, n in local.networks : tostring(i) => n }
  name                 = "${local.name}-${each.value}"
  network_name         = each.value
  port_security        = var.port_security && !contains(var.node_group.networks_without_security, each.value)
  security_group_names = concat([var.prefix], var.node_group.additional_security_groups)
  allowed_cidrs        = [var.pod_subnet_cidr]
  metadata             = var.node_group.metadata
}

data "openstack_images_image_v2" "image" {
  name        = var.node_group.image_name
  most_recent = true
}

resource "openstack_compute_instance_v2" "node" {
  name              = local.name
  flavor_name       = var.node_group.flavor_name
  image_id          = var.node_group.root_disk_size == null ? data.openstack_images_image_v2.image.id : null
  key_pair          = var.keypair_name
  availability_zone = local.zone
  user_data         = var.cloud_config == "" ? null : base64decode(var.cloud_config)
  config_drive      = var.node_group.config_drive
  metadata          = var.node_group.metadata

  dynamic "block_device" {
    for_each = var.node_group.root_disk_size == null ? [] : [var.node_group.root_disk_size]
    content {
      uuid                  = data.openstack_images_image_v2.image.id
      source_type           = "image"
      destination_type      = "volume"
      boot_index            = 0
      volume_size           = block_device.value
      volume_type           = local.volume_type
      delete_on_termination = true
    }
  }

  dynamic "network" {
    for_each = range(length(local.networks))
    content {
      port = module.ports[tostring(network.value)].id
    }
  }

  lifecycle {
    ignore_changes = [user_data, image_id]
  }
}

resource "openstack_networking_floatingip_v2" "node" {
  count = length(var.node_group.floating_ip_pools) > 0 ? 1 : 0
  pool  = var.node_group.floating_ip_pools[0]
}

resource "openstack_networking_floatingip_associate_v2" "node" {
  count       = length(var.node_group.floating_ip_pools) > 0 ? 1 : 0
  floating_ip = openstack_networking_floatingip_v2.node[0].address
  port_id     = module.ports["0"].id
}

output "node_internal_ip_address" {
  description = "The node's address on its main network."
  value       = openstack_compute_instance_v2.node.access_ip_v4
}

output "ports" {
  description = "The node's ports by network: filtered or not."
  value       = { for i, n in local.networks : n => module.ports[tostring(i)].port_security_enabled }
}

output "floating_ip_pools" {
  description = "Pools of the node's floating IPs (empty for none)."
  value       = openstack_networking_floatingip_v2.node[*].pool
}

output "zone" {
  description = "The node's zone."
  value       = local.zone
}
