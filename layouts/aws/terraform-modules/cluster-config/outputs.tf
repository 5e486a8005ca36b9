output "prefix" {
  description = "Prefix of every resource name (clusterConfiguration.cloud.prefix)."
  value       = local.prefix
}

output "layout" {
  description = "The layout name (WithoutNAT, WithNAT or the deprecated Standard)."
  value       = local.layout
}

output "internal_subnet" {
  description = "Whether the layout has internal subnets behind a NAT gateway (WithNAT, Standard)."
  value       = local.internal_subnet
}

output "masters_public" {
  description = "Whether masters sit in the public subnets with an Elastic IP (WithoutNAT only)."
  value       = local.masters_public
}

output "statics_public" {
  description = "Whether static nodes sit in the public subnets with an Elastic IP (WithoutNAT)."
  value       = local.statics_public
}

output "region" {
  description = "The AWS region."
  value       = local.pcc.provider.region
}

output "ssh_public_key" {
  description = "The public key of the cluster's key pair."
  value       = local.pcc.sshPublicKey
}

output "pod_subnet_cidr" {
  description = "The pod network."
  value       = var.clusterConfiguration.podSubnetCIDR
}

output "vpc" {
  description = "The VPC: a new one (cidr) or an existing one (id), and the VPCs to peer with."
  value = {
    cidr        = local.pcc.vpcNetworkCIDR
    existing_id = local.pcc.existingVPCID
    peered_ids  = local.pcc.peeredVPCs
  }
}

output "node_network_cidr" {
  description = "The node network inside the VPC, or null: the VPC's CIDR (Deckhouse's default)."
  value       = local.pcc.nodeNetworkCIDR
}

output "zones" {
  description = "Zones nodes are limited to (zones), or null: every zone of the region. Subnets cover every zone of the region either way."
  value       = local.pcc.zones
}

output "ssh_allow_list" {
  description = "CIDRs allowed to reach SSH (Deckhouse's default: anywhere)."
  value       = coalesce(local.pcc.sshAllowList, [local.anywhere])
}

output "public_network_allow_list" {
  description = "CIDRs allowed to reach load balancers and to ping nodes (publicNetworkAllowList; Deckhouse's default: anywhere)."
  value       = coalesce(local.pcc.publicNetworkAllowList, [local.anywhere])
}

output "default_security_group" {
  description = "Whether the node, load-balancer and SSH security groups are created (disableDefaultSecurityGroup false)."
  value       = !local.pcc.disableDefaultSecurityGroup
}

output "cluster_tag_key" {
  description = "The cluster tag key, kubernetes.io/cluster/<clusterUUID>."
  value       = local.cluster_tag_key
}

output "tags" {
  description = "The configured tags: every resource carries them."
  value       = local.pcc.tags
}

output "cluster_tags" {
  description = "The configured tags and both cluster tags (kubernetes.io/cluster/<clusterUUID> and kubernetes.io/cluster/<prefix>, shared): subnets, internal route tables, the node group, instances."
  value       = merge(local.pcc.tags, local.cluster_tags)
}

output "public_subnet_tags" {
  description = "Tags of public subnets: internet-facing load balancers go there (and, without internal subnets, internal ones too)."
  value       = merge(local.pcc.tags, local.cluster_tags, { (local.role_elb) = "1" }, local.internal_subnet ? {} : { (local.role_internal_elb) = "1" })
}

output "internal_subnet_tags" {
  description = "Tags of internal subnets (WithNAT, Standard): internal load balancers go there."
  value       = merge(local.pcc.tags, local.cluster_tags, { (local.role_internal_elb) = "1" })
}

output "instance_tags" {
  description = "Tags of every node instance: the cluster tags (the CCM's instance cache lists by them) and the node-termination-handler's managed tag."
  value       = merge(local.pcc.tags, local.cluster_tags, { (local.nth_managed_tag) = "true" })
}

output "iam" {
  description = "IAM: extra actions for the masters' and nodes' roles (additionalRolePolicies) and the nodes' existing role (iamNodeRole), if any."
  value = {
    additional_role_policies = coalesce(local.pcc.additionalRolePolicies, [])
    node_role                = local.pcc.iamNodeRole
  }
}

output "master" {
  description = "The master node group (additionalTags beside instanceClass, as Deckhouse has it)."
  value       = local.master
}

output "node_groups" {
  description = "The static node groups by name."
  value       = local.node_groups
}

output "bastion" {
  description = "The WithNAT bastion instance, or null."
  value       = local.bastion
}

output "node_index_in_range" {
  description = "Whether nodeIndex is below the replicas of its group (masterNodeGroup, or nodeGroups[nodeGroupName])."
  value       = local.node_index_in_range
}
