# Master number nodeIndex: in the zone nodeIndex picks (of masterNodeGroup.zones, else of the
# cluster's zones), in that zone's public subnet with an Elastic IP (WithoutNAT) or its
# internal one (WithNAT, Standard), with the masters' instance profile and an etcd volume.

locals {
  master_zones = module.config.master.zones == null ? local.zones : sort(setintersection(local.region_zones, module.config.master.zones))
  zone         = element(local.master_zones, var.nodeIndex)
  # Subnets are named by the zone's index in the region (Deckhouse's names).
  subnet_name = "${local.prefix}-${module.config.masters_public ? "public" : "internal"}-${index(local.region_zones, local.zone)}"
}

data "aws_subnet" "node" {
  filter {
    name   = "tag:Name"
    values = [local.subnet_name]
  }

  lifecycle {
    precondition {
      condition     = module.config.node_index_in_range
      error_message = "nodeIndex must be below masterNodeGroup.replicas."
    }
  }
}

data "aws_security_group" "node" {
  count  = module.config.default_security_group ? 1 : 0
  vpc_id = data.aws_subnet.node.vpc_id
  name   = "${local.prefix}-node"
}

data "aws_security_group" "ssh" {
  count  = module.config.default_security_group && length(module.config.ssh_allow_list) > 0 ? 1 : 0
  vpc_id = data.aws_subnet.node.vpc_id
  name   = "${local.prefix}-ssh-accessible"
}

module "master-node" {
  source               = "../../../terraform-modules/node"
  name                 = "${local.prefix}-master-${var.nodeIndex}"
  instance_class       = module.config.master.instanceClass
  additional_tags      = module.config.master.additionalTags
  etcd_disk            = module.config.master.instanceClass.etcdDisk
  subnet_id            = data.aws_subnet.node.id
  zone                 = local.zone
  security_group_ids   = concat(data.aws_security_group.node[*].id, data.aws_security_group.ssh[*].id)
  iam_instance_profile = "${local.prefix}-master"
  key_name             = local.prefix
  cloud_config         = var.cloudConfig
  public_ip            = module.config.masters_public
  instance_tags        = module.config.instance_tags
  volume_tags          = module.config.cluster_tags
  eip_tags             = module.config.tags
}

# Deckhouse's master-node module names the instance "master" and keeps one data volume.
moved {
  from = module.master-node.aws_instance.master
  to   = module.master-node.aws_instance.node
}

moved {
  from = module.master-node.aws_ebs_volume.kubernetes_data
  to   = module.master-node.aws_ebs_volume.kubernetes_data[0]
}

moved {
  from = module.master-node.aws_volume_attachment.kubernetes_data
  to   = module.master-node.aws_volume_attachment.kubernetes_data[0]
}
