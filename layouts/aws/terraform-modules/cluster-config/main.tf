# Normalises the AWSClusterConfiguration (Deckhouse's defaults) and owns the tag contract: what
# Stratus's CCM, the EBS CSI driver and the node-termination-handler read from the cloud, and the
# tags Deckhouse's layouts put on the same resources, is decided here, once, and checked by
# stratus-layouts-check against the CCM's own constants.

# The document typed with Deckhouse's defaults and its values checked; fields.tf refuses the fields
# the typing would drop.
module "typed" {
  source                       = "./typed"
  providerClusterConfiguration = var.providerClusterConfiguration
}

locals {
  pcc    = module.typed.providerClusterConfiguration
  prefix = var.clusterConfiguration.cloud.prefix
  # The world, where Deckhouse's schema defaults an allow list to it.
  anywhere = "0.0.0.0/0"

  # The CCM lists instances, route tables, subnets and security groups by the tag keyed by the
  # cluster UUID (KubernetesClusterID = clusterUUID in its cloud config); Deckhouse's layouts also
  # tag the same resources with the prefix, and tooling keyed on either keeps working.
  cluster_tag_key        = "kubernetes.io/cluster/${var.clusterUUID}"
  cluster_prefix_tag_key = "kubernetes.io/cluster/${local.prefix}"
  cluster_tags           = { (local.cluster_tag_key) = "shared", (local.cluster_prefix_tag_key) = "shared" }

  # Subnet roles the CCM's load-balancer subnet discovery ranks first (value "1").
  role_elb          = "kubernetes.io/role/elb"
  role_internal_elb = "kubernetes.io/role/internal-elb"

  # The node-termination-handler in queue mode only acts on instances carrying this tag.
  nth_managed_tag = "aws-node-termination-handler/managed"

  # WithNAT and the deprecated Standard have internal subnets behind a NAT gateway, and every
  # node of theirs lives there (Standard has no bastion: dhctl reaches its masters through the
  # VPC, as Deckhouse's Standard master-node layout leaves them without a public address). In
  # WithoutNAT masters and static nodes are public, with an Elastic IP each.
  layout          = local.pcc.layout
  internal_subnet = local.layout != "WithoutNAT"
  masters_public  = local.layout == "WithoutNAT"
  statics_public  = local.layout == "WithoutNAT"

  master      = local.pcc.masterNodeGroup
  node_groups = { for ng in local.pcc.nodeGroups : ng.name => ng }
  bastion     = local.layout == "WithNAT" ? try(local.pcc.withNAT.bastionInstance, null) : null

  # dhctl runs master-node replicas times (static-node replicas times per group): an index
  # beyond that is a mistake.
  group_replicas      = var.nodeGroupName == "" ? local.master.replicas : try(local.node_groups[var.nodeGroupName].replicas, 0)
  node_index_in_range = var.nodeIndex < local.group_replicas
}
