# The cluster's network, security groups, IAM roles and key pair.

module "network" {
  source               = "../../../terraform-modules/network"
  prefix               = local.prefix
  vpc                  = module.config.vpc
  zones                = local.zones
  with_nat             = module.config.with_nat
  public_subnet_cidrs  = module.config.public_subnet_cidrs
  private_subnet_cidrs = module.config.private_subnet_cidrs
  tags                 = module.config.tags
  public_subnet_tags   = module.config.public_subnet_tags
  private_subnet_tags  = module.config.private_subnet_tags
}

module "security_groups" {
  source           = "../../../terraform-modules/security-groups"
  prefix           = local.prefix
  vpc_id           = module.network.vpc_id
  ssh_allow_list   = module.config.ssh_allow_list
  create_ssh_group = module.config.default_security_group
  cluster_tags     = module.config.tags
  other_tags       = module.config.untagged_for_cluster
}

module "iam" {
  source                   = "../../../terraform-modules/iam"
  prefix                   = local.prefix
  additional_role_policies = module.config.iam.additional_role_policies
  node_role                = module.config.iam.node_role
  tags                     = module.config.tags
}

resource "aws_key_pair" "ssh" {
  key_name   = local.prefix
  public_key = module.config.ssh_public_key
  tags       = module.config.tags
}

# The bastion: the only instance with a public address; dhctl reaches the nodes through it.
module "bastion" {
  source               = "../../../terraform-modules/node"
  name                 = "${local.prefix}-bastion"
  instance_class       = merge({ additionalSecurityGroups = [], additionalTags = {} }, module.config.bastion.instanceClass)
  subnet_id            = module.network.public_subnet_ids[coalesce(module.config.bastion.zone, local.zones[0])]
  zone                 = coalesce(module.config.bastion.zone, local.zones[0])
  security_group_ids   = concat([module.security_groups.cluster_group_id], module.security_groups.ssh_group_ids)
  iam_instance_profile = module.iam.node_profile
  key_name             = aws_key_pair.ssh.key_name
  cloud_config         = ""
  public_ip            = true
  instance_tags        = module.config.untagged_for_cluster
  volume_tags          = module.config.untagged_for_cluster
}
