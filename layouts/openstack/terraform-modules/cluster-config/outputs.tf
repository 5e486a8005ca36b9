output "prefix" {
  description = "Prefix of every resource name (clusterConfiguration.cloud.prefix)."
  value       = local.prefix
}

output "layout" {
  description = "The layout name."
  value       = local.pcc.layout
}

output "cluster_uuid" {
  description = "The cluster's UUID."
  value       = var.clusterUUID
}

output "metadata" {
  description = "Metadata (tags) for every server and volume: the configured tags plus the cluster UUID."
  value       = merge(local.pcc.tags, { "cluster-uuid" = var.clusterUUID })
}

output "ssh_public_key" {
  description = "The public key of the cluster's keypair."
  value       = local.pcc.sshPublicKey
}

output "ssh_allow_list" {
  description = "CIDRs allowed to reach SSH, ICMP and the Kubernetes API."
  value       = local.pcc.sshAllowList
}

output "zones" {
  description = "Zones the cluster is limited to (empty: every zone of the region)."
  value       = local.pcc.zones
}

output "pod_subnet_cidr" {
  description = "The pod network, let through the node ports as an allowed address pair."
  value       = var.clusterConfiguration.podSubnetCIDR
}

output "region" {
  description = "The OpenStack region."
  value       = local.pcc.provider.region
}

output "network" {
  description = "Where nodes are attached and how: internal and external networks, port security, pod network mode, floating IPs."
  value       = local.network
}

output "master" {
  description = "The master node group, normalised."
  value       = local.master
}

output "node_groups" {
  description = "The static node groups by name, normalised."
  value       = local.node_groups
}

output "bastion" {
  description = "The Standard layout's bastion, or null."
  value       = local.bastion
}

output "provider" {
  description = "The connection to the OpenStack API (provider), typed: caCert empty when left out, one of tenantName and tenantID null."
  value       = local.pcc.provider
}
