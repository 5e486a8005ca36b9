# Static node nodeIndex of node group nodeGroupName: in the zone nodeIndex picks (of the
# group's zones, else of the cluster's zones), in that zone's public subnet with an Elastic IP
# (WithoutNAT) or its internal one (WithNAT, Standard).

locals {
  group       = module.config.node_groups[var.nodeGroupName]
  group_zones = local.group.zones == null ? local.zones : sort(setintersection(local.region_zones, local.group.zones))
  zone        = element(local.group_zones, var.nodeIndex)
  subnet_name = "${local.prefix}-${module.config.statics_public ? "public" : "internal"}-${index(local.region_zones, local.zone)}"
}

data "aws_subnet" "node" {
  filter {
    name   = "tag:Name"
    values = [local.subnet_name]
  }

  lifecycle {
    precondition {
      condition     = module.config.node_index_in_range
      error_message = "nodeIndex must be below the replicas of nodeGroups[nodeGroupName]."
    }
  }
}

data "aws_security_group" "node" {
  count  = module.config.default_security_group ? 1 : 0
  vpc_id = data.aws_subnet.node.vpc_id
  name   = "${local.prefix}-node"
}

module "static-node" {
  source               = "../../../terraform-modules/node"
  name                 = "${local.prefix}-${var.nodeGroupName}-${var.nodeIndex}"
  instance_class       = local.group.instanceClass
  additional_tags      = local.group.additionalTags
  subnet_id            = data.aws_subnet.node.id
  zone                 = local.zone
  security_group_ids   = data.aws_security_group.node[*].id
  iam_instance_profile = "${local.prefix}-node"
  key_name             = local.prefix
  cloud_config         = var.cloudConfig
  public_ip            = module.config.statics_public
  instance_tags        = module.config.instance_tags
  volume_tags          = module.config.cluster_tags
  eip_tags             = module.config.tags
}
