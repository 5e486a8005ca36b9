# The cluster's security group: nodes talk to each other freely; SSH, ICMP and the Kubernetes
# API are open to the allow list only. Neutron adds the default egress rules itself.

variable "prefix" {
  description = "Name of the security group (the cluster prefix)."
  type        = string
}

variable "enabled" {
  description = "Whether ports are filtered at all; false creates nothing."
  type        = bool
}

variable "allow_list" {
  description = "CIDRs allowed to reach SSH (22), ICMP and the Kubernetes API (6443)."
  type        = list(string)
}

variable "metadata" {
  description = "Tags of the security group."
  type        = map(string)
}

locals {
  # One rule per (CIDR, protocol, port) the allow list opens.
  allow_rules = var.enabled ? flatten([
    for cidr in var.allow_list : [
      { key = "ssh-${cidr}", cidr = cidr, protocol = "tcp", port = 22 },
      { key = "kube-api-${cidr}", cidr = cidr, protocol = "tcp", port = 6443 },
      { key = "icmp-${cidr}", cidr = cidr, protocol = "icmp", port = null },
    ]
  ]) : []
}

resource "openstack_networking_secgroup_v2" "cluster" {
  count       = var.enabled ? 1 : 0
  name        = var.prefix
  description = "Nodes of cluster ${var.prefix}"
  tags        = [for k, v in var.metadata : "${k}=${v}"]
}

resource "openstack_networking_secgroup_rule_v2" "within_cluster" {
  count             = var.enabled ? 1 : 0
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_group_id   = openstack_networking_secgroup_v2.cluster[0].id
  security_group_id = openstack_networking_secgroup_v2.cluster[0].id
  description       = "every protocol between nodes of the cluster"
}

resource "openstack_networking_secgroup_rule_v2" "allow_list" {
  for_each          = { for r in local.allow_rules : r.key => r }
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value.protocol
  port_range_min    = each.value.port
  port_range_max    = each.value.port
  remote_ip_prefix  = each.value.cidr
  security_group_id = openstack_networking_secgroup_v2.cluster[0].id
  description       = "from the allow list"
}

output "security_group_ids" {
  description = "The group's ID (empty when disabled)."
  value       = openstack_networking_secgroup_v2.cluster[*].id
}

output "security_group_names" {
  description = "The group's name (empty when disabled)."
  value       = openstack_networking_secgroup_v2.cluster[*].name
}

output "rules" {
  description = "The ingress rules created: protocol, port and source (a CIDR, or the group itself)."
  value = concat(
    [for r in openstack_networking_secgroup_rule_v2.within_cluster : { protocol = "any", port = null, source = "cluster" }],
    [for r in openstack_networking_secgroup_rule_v2.allow_list : { protocol = r.protocol, port = r.port_range_min, source = r.remote_ip_prefix }],
  )
}
