# The cluster's VPC: a new one (vpcNetworkCIDR) or an existing one (existingVPCID), at the
# addresses Deckhouse's layouts keep them (module.vpc.aws_vpc.kube[0], data.aws_vpc.kube[0]).

variable "prefix" {
  description = "Name of the VPC."
  type        = string
}

variable "cidr_block" {
  description = "CIDR of a new VPC, or null with existing_vpc_id."
  type        = string
}

variable "existing_vpc_id" {
  description = "An existing VPC to use, or null."
  type        = string
}

variable "tags" {
  description = "The configured tags."
  type        = map(string)
}

resource "aws_vpc" "kube" {
  count                = var.existing_vpc_id == null ? 1 : 0
  cidr_block           = var.cidr_block
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(var.tags, { Name = var.prefix })
}

data "aws_vpc" "kube" {
  count = var.existing_vpc_id == null ? 0 : 1
  id    = var.existing_vpc_id
}

output "id" {
  description = "The VPC's ID."
  value       = var.existing_vpc_id == null ? aws_vpc.kube[0].id : data.aws_vpc.kube[0].id
}

output "cidr_block" {
  description = "The VPC's CIDR."
  value       = var.existing_vpc_id == null ? aws_vpc.kube[0].cidr_block : data.aws_vpc.kube[0].cidr_block
}
