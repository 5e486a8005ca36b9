output "prefix" {
  description = "Prefix of every resource name (clusterConfiguration.cloud.prefix)."
  value       = local.prefix
}

output "layout" {
  description = "The layout name."
  value       = local.pcc.layout
}

output "with_nat" {
  description = "Whether nodes sit in private subnets behind a NAT gateway (WithNAT)."
  value       = local.with_nat
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
  description = "The node network inside the VPC."
  value       = local.pcc.nodeNetworkCIDR
}

output "public_subnet_cidrs" {
  description = "CIDR of the public subnet of zone 0 to 3."
  value       = local.public_subnet_cidrs
}

output "private_subnet_cidrs" {
  description = "CIDR of the private subnet of zone 0 to 3 (WithNAT)."
  value       = local.private_subnet_cidrs
}

output "zones" {
  description = "Zones the cluster is limited to (empty: the region's first 4)."
  value       = local.pcc.zones
}

output "ssh_allow_list" {
  description = "CIDRs allowed to reach SSH (and the Kubernetes API on masters)."
  value       = local.pcc.sshAllowList
}

output "default_security_group" {
  description = "Whether the SSH security group is created (disableDefaultSecurityGroup false)."
  value       = !local.pcc.disableDefaultSecurityGroup
}

output "cluster_tag_key" {
  description = "The cluster tag key, kubernetes.io/cluster/<clusterUUID>."
  value       = local.cluster_tag_key
}

output "tags" {
  description = "The configured tags plus the cluster tag (owned): every resource the cluster owns."
  value       = local.cluster_tags
}

output "untagged_for_cluster" {
  description = "The configured tags alone: security groups that must not receive the CCM's load-balancer rules."
  value       = local.pcc.tags
}

output "public_subnet_tags" {
  description = "Tags of public subnets: internet-facing load balancers go there (and, WithoutNAT, internal ones too)."
  value       = merge(local.cluster_tags, { (local.role_elb) = "1" }, local.with_nat ? {} : { (local.role_internal_elb) = "1" })
}

output "private_subnet_tags" {
  description = "Tags of private subnets (WithNAT): internal load balancers go there."
  value       = merge(local.cluster_tags, { (local.role_internal_elb) = "1" })
}

output "instance_tags" {
  description = "Tags of every node instance: the cluster tag (the CCM's instance cache lists by it) and the node-termination-handler's managed tag."
  value       = merge(local.cluster_tags, { (local.nth_managed_tag) = "true" })
}

output "iam" {
  description = "IAM: extra actions for the masters' role and the nodes' existing role, if any."
  value = {
    additional_role_policies = local.pcc.additionalRolePolicies
    node_role                = local.pcc.iamNodeRole
  }
}

output "master" {
  description = "The master node group."
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
