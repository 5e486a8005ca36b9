# What every OpenStack layout's base infrastructure has: the cluster's keypair, its security
# group (when ports are filtered) and the masters' anti-affinity server group (when asked for).

variable "prefix" {
  description = "The cluster prefix: name of the keypair, the security group and the server group stem."
  type        = string
}

variable "ssh_public_key" {
  description = "Public key of the keypair."
  type        = string
}

variable "port_security" {
  description = "Whether the layout filters ports (creates the security group)."
  type        = bool
}

variable "allow_list" {
  description = "CIDRs allowed to reach SSH, ICMP and the Kubernetes API."
  type        = list(string)
}

variable "anti_affinity" {
  description = "Whether masters go into an anti-affinity server group created here."
  type        = bool
}

variable "metadata" {
  description = "Tags of what is created."
  type        = map(string)
}

resource "openstack_compute_keypair_v2" "ssh" {
  name       = var.prefix
  public_key = var.ssh_public_key
}

module "network_security" {
  source     = "../network-security"
  prefix     = var.prefix
  enabled    = var.port_security
  allow_list = var.allow_list
  metadata   = var.metadata
}

resource "openstack_compute_servergroup_v2" "masters" {
  count    = var.anti_affinity ? 1 : 0
  name     = "${var.prefix}-masters"
  policies = ["anti-affinity"]
}

output "keypair_name" {
  description = "Name of the keypair."
  value       = openstack_compute_keypair_v2.ssh.name
}

output "security_group_names" {
  description = "The cluster's security groups (empty without port security)."
  value       = module.network_security.security_group_names
}

output "master_server_group_id" {
  description = "ID of the masters' server group, empty without anti-affinity."
  value       = try(openstack_compute_servergroup_v2.masters[0].id, "")
}

output "security_rules" {
  description = "Ingress rules of the cluster's security group."
  value       = module.network_security.rules
}

output "security_group_ids" {
  description = "IDs of the cluster's security groups (empty without port security)."
  value       = module.network_security.security_group_ids
}
