# Normalises the AWS cluster configuration and owns the tag contract: what Stratus's CCM, the
# EBS CSI driver and the node-termination-handler read from the cloud is decided here, once,
# and checked by stratus-layouts-check against the CCM's own constants.

locals {
  pcc    = var.providerClusterConfiguration
  prefix = var.clusterConfiguration.cloud.prefix

  # The CCM lists instances, route tables, subnets and security groups by this tag key
  # (KubernetesClusterID = clusterUUID in its cloud config).
  cluster_tag_key = "kubernetes.io/cluster/${var.clusterUUID}"
  cluster_tags    = merge(local.pcc.tags, { (local.cluster_tag_key) = "owned" })

  # Subnet roles the CCM's load-balancer subnet discovery ranks first (value "1").
  role_elb          = "kubernetes.io/role/elb"
  role_internal_elb = "kubernetes.io/role/internal-elb"

  # The node-termination-handler in queue mode only acts on instances carrying this tag.
  nth_managed_tag = "aws-node-termination-handler/managed"

  with_nat = local.pcc.layout == "WithNAT"

  # nodeNetworkCIDR is cut into 8 equal subnets: public ones for zones 0-3, then private ones.
  public_subnet_cidrs  = [for i in range(4) : cidrsubnet(local.pcc.nodeNetworkCIDR, 3, i)]
  private_subnet_cidrs = [for i in range(4) : cidrsubnet(local.pcc.nodeNetworkCIDR, 3, 4 + i)]

  master      = local.pcc.masterNodeGroup
  node_groups = { for ng in local.pcc.nodeGroups : ng.name => ng }
  bastion     = try(local.pcc.withNAT.bastionInstance, null)

  # dhctl runs master-node replicas times (static-node replicas times per group): an index
  # beyond that is a mistake.
  group_replicas      = var.nodeGroupName == "" ? local.master.replicas : try(local.node_groups[var.nodeGroupName].replicas, 0)
  node_index_in_range = var.nodeIndex < local.group_replicas
}
