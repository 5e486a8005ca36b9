# Master number nodeIndex: in the zone nodeIndex picks, with the masters' instance profile and
# an etcd volume.

data "aws_subnet" "node" {
  filter {
    name   = "tag:Name"
    values = ["${local.prefix}-${module.config.with_nat ? "private" : "public"}-${local.zone}"]
  }

  lifecycle {
    precondition {
      condition     = module.config.node_index_in_range
      error_message = "nodeIndex must be below the replicas of the node's group (masterNodeGroup.replicas or the replicas of nodeGroups[nodeGroupName])."
    }
  }
}

data "aws_security_group" "cluster" {
  vpc_id = data.aws_subnet.node.vpc_id
  name   = "${local.prefix}-cluster"
}

data "aws_security_group" "ssh" {
  count  = module.config.default_security_group ? 1 : 0
  vpc_id = data.aws_subnet.node.vpc_id
  name   = "${local.prefix}-ssh"
}

locals {
  master_zones = length(module.config.master.zones) > 0 ? sort(module.config.master.zones) : local.zones
  zone         = element(local.master_zones, var.nodeIndex)
}

module "master" {
  source               = "../../../terraform-modules/node"
  name                 = "${local.prefix}-master-${var.nodeIndex}"
  instance_class       = module.config.master.instanceClass
  etcd_disk            = module.config.master.instanceClass.etcdDisk
  subnet_id            = data.aws_subnet.node.id
  zone                 = local.zone
  security_group_ids   = concat([data.aws_security_group.cluster.id], data.aws_security_group.ssh[*].id)
  iam_instance_profile = "${local.prefix}-master"
  key_name             = local.prefix
  cloud_config         = var.cloudConfig
  public_ip            = !module.config.with_nat
  instance_tags        = module.config.instance_tags
  volume_tags          = module.config.tags
}
