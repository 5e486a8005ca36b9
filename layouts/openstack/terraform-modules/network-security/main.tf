# The cluster's security group, at Deckhouse's addresses (kube, allow_*): nodes talk to each
# other freely; SSH and ICMP are open to the allow list; the NodePort range is open to anyone,
# so Octavia's amphorae reach the members of load balancers. Neutron adds the egress rules.

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
  # The one world-open source of this module: load balancers reach NodePorts from anywhere.
  anywhere   = "0.0.0.0/0"
  allow_list = var.enabled ? var.allow_list : []
  node_ports = { min = 30000, max = 32767 }
}

resource "openstack_networking_secgroup_v2" "kube" {
  count       = var.enabled ? 1 : 0
  name        = var.prefix
  description = "Nodes of cluster ${var.prefix}"
  tags        = [for k, v in var.metadata : "${k}=${v}"]
}

# Rules are immutable in Neutron: a description only labels the rules created here, a rule
# taken over keeps its own.
resource "openstack_networking_secgroup_rule_v2" "allow_internal_communication" {
  count             = var.enabled ? 1 : 0
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_group_id   = openstack_networking_secgroup_v2.kube[0].id
  security_group_id = openstack_networking_secgroup_v2.kube[0].id
  description       = "every protocol between nodes of the cluster"
  lifecycle {
    ignore_changes = [description]
  }
}

resource "openstack_networking_secgroup_rule_v2" "allow_node_ports" {
  count             = var.enabled ? 1 : 0
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = local.node_ports.min
  port_range_max    = local.node_ports.max
  remote_ip_prefix  = local.anywhere
  security_group_id = openstack_networking_secgroup_v2.kube[0].id
  description       = "NodePorts, for load balancers"
  lifecycle {
    ignore_changes = [description]
  }
}

resource "openstack_networking_secgroup_rule_v2" "allow_ssh" {
  count             = length(local.allow_list)
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = local.allow_list[count.index]
  security_group_id = openstack_networking_secgroup_v2.kube[0].id
}

resource "openstack_networking_secgroup_rule_v2" "allow_icmp" {
  count             = length(local.allow_list)
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "icmp"
  remote_ip_prefix  = local.allow_list[count.index]
  security_group_id = openstack_networking_secgroup_v2.kube[0].id
}

resource "openstack_networking_secgroup_rule_v2" "allow_kube_api" {
  count             = length(local.allow_list)
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 6443
  port_range_max    = 6443
  remote_ip_prefix  = local.allow_list[count.index]
  security_group_id = openstack_networking_secgroup_v2.kube[0].id
}

output "security_group_ids" {
  description = "The group's ID (empty when disabled)."
  value       = openstack_networking_secgroup_v2.kube[*].id
}

output "security_group_names" {
  description = "The group's name (empty when disabled)."
  value       = openstack_networking_secgroup_v2.kube[*].name
}

output "rules" {
  description = "The ingress rules created: protocol, port range and source (a CIDR, or the group itself)."
  value = concat(
    [for r in openstack_networking_secgroup_rule_v2.allow_internal_communication : { protocol = "any", port = null, port_max = null, source = "cluster" }],
    [for r in openstack_networking_secgroup_rule_v2.allow_node_ports : { protocol = r.protocol, port = r.port_range_min, port_max = r.port_range_max, source = r.remote_ip_prefix }],
    [for r in openstack_networking_secgroup_rule_v2.allow_ssh : { protocol = r.protocol, port = r.port_range_min, port_max = r.port_range_max, source = r.remote_ip_prefix }],
    [for r in openstack_networking_secgroup_rule_v2.allow_icmp : { protocol = r.protocol, port = null, port_max = null, source = r.remote_ip_prefix }],
    [for r in openstack_networking_secgroup_rule_v2.allow_kube_api : { protocol = r.protocol, port = r.port_range_min, port_max = r.port_range_max, source = r.remote_ip_prefix }],
  )
}
