# The cluster's VPC, network, security groups, IAM roles, key pair and (WithNAT) bastion. The
# same file serves every AWS layout: the layout of the configuration decides.

module "vpc" {
  source          = "../../../terraform-modules/vpc"
  prefix          = local.prefix
  cidr_block      = module.config.vpc.cidr
  existing_vpc_id = module.config.vpc.existing_id
  tags            = module.config.tags
}

module "network" {
  source               = "../../../terraform-modules/network"
  prefix               = local.prefix
  vpc_id               = module.vpc.id
  subnet_cidr          = coalesce(module.config.node_network_cidr, module.vpc.cidr_block)
  zones                = local.region_zones
  internal_subnet      = module.config.internal_subnet
  peered_vpc_ids       = module.config.vpc.peered_ids
  region               = module.config.region
  vpc_cidr             = module.vpc.cidr_block
  tags                 = module.config.tags
  cluster_tags         = module.config.cluster_tags
  public_subnet_tags   = module.config.public_subnet_tags
  internal_subnet_tags = module.config.internal_subnet_tags
}

module "security-groups" {
  source                    = "../../../terraform-modules/security-groups"
  prefix                    = local.prefix
  vpc_id                    = module.vpc.id
  create                    = module.config.default_security_group
  ssh_allow_list            = module.config.ssh_allow_list
  public_network_allow_list = module.config.public_network_allow_list
  tags                      = module.config.tags
  cluster_tags              = module.config.cluster_tags
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
  tags       = merge(module.config.tags, { Cluster = local.prefix })
}

locals {
  bastion      = module.config.bastion
  bastion_zone = try(coalesce(local.bastion.zone, local.zones[0]), local.zones[0])
}

# The WithNAT bastion: nodes have no public address there, dhctl reaches them through it.
module "bastion" {
  count                = local.bastion == null ? 0 : 1
  source               = "../../../terraform-modules/node"
  name                 = "${local.prefix}-bastion"
  instance_class       = local.bastion.instanceClass
  additional_tags      = local.bastion.additionalTags
  subnet_id            = module.network.zone_to_public_subnet_id[local.bastion_zone]
  zone                 = local.bastion_zone
  security_group_ids   = module.security-groups.node_group_ids
  iam_instance_profile = module.iam.node_profile
  key_name             = aws_key_pair.ssh.key_name
  cloud_config         = ""
  public_ip            = true
  instance_tags        = module.config.tags
  volume_tags          = module.config.tags
  eip_tags             = module.config.tags
}
