# One Neutron port of a node on a network found by name: filtered by the given security groups
# with the pod network as an allowed address pair, or with port security off.

variable "name" {
  description = "Name of the port."
  type        = string
}

variable "network_name" {
  description = "Name of the network the port is on; empty takes the network of subnet_name."
  type        = string
}

variable "subnet_name" {
  description = "Name of the subnet to take the fixed IP from; empty lets Neutron choose."
  type        = string
  default     = ""
}

variable "port_security" {
  description = "Whether the port is filtered by security groups."
  type        = bool
}

variable "security_group_names" {
  description = "Security groups of the port (only with port security)."
  type        = list(string)
  default     = []
}

variable "allowed_cidrs" {
  description = "CIDRs the node may send from besides its own address (the pod network), with port security."
  type        = list(string)
  default     = []
}

variable "metadata" {
  description = "Tags of the port."
  type        = map(string)
}

data "openstack_networking_network_v2" "network" {
  count = var.network_name == "" ? 0 : 1
  name  = var.network_name
}

data "openstack_networking_subnet_v2" "subnet" {
  count = var.subnet_name == "" ? 0 : 1
  name  = var.subnet_name
}

data "openstack_networking_secgroup_v2" "groups" {
  for_each = var.port_security ? toset(var.security_group_names) : toset([])
  name     = each.value
}

resource "openstack_networking_port_v2" "port" {
  name                  = var.name
  network_id            = var.network_name == "" ? data.openstack_networking_subnet_v2.subnet[0].network_id : data.openstack_networking_network_v2.network[0].id
  admin_state_up        = true
  port_security_enabled = var.port_security
  security_group_ids    = var.port_security ? [for g in data.openstack_networking_secgroup_v2.groups : g.id] : null
  tags                  = [for k, v in var.metadata : "${k}=${v}"]

  dynamic "fixed_ip" {
    for_each = data.openstack_networking_subnet_v2.subnet
    content {
      subnet_id = fixed_ip.value.id
    }
  }

  dynamic "allowed_address_pairs" {
    for_each = var.port_security ? var.allowed_cidrs : []
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

output "id" {
  description = "The port's ID."
  value       = openstack_networking_port_v2.port.id
}

output "ip_address" {
  description = "The port's first fixed IPv4 address."
  value       = try(openstack_networking_port_v2.port.all_fixed_ips[0], "")
}

output "port_security_enabled" {
  description = "Whether the port is filtered."
  value       = openstack_networking_port_v2.port.port_security_enabled
}

output "security_group_ids" {
  description = "Security groups of the port."
  value       = openstack_networking_port_v2.port.security_group_ids
}

output "allowed_address_pairs" {
  description = "Addresses the port may send from besides its own."
  value       = [for p in openstack_networking_port_v2.port.allowed_address_pairs : p.ip_address]
}

output "network_id" {
  description = "The port's network."
  value       = openstack_networking_port_v2.port.network_id
}
