# The network of a cluster: the VPC (new or existing), one public subnet per zone (and one
# private subnet per zone behind a NAT gateway with NAT), route tables, and VPC peerings.
# Subnets carry the role tags and route tables the cluster tag the CCM discovers them by.

variable "prefix" {
  description = "Name stem of every resource."
  type        = string
}

variable "vpc" {
  description = "A new VPC's CIDR or an existing VPC's ID, and the VPCs to peer with."
  type = object({
    cidr        = string
    existing_id = string
    peered_ids  = list(string)
  })
}

variable "zones" {
  description = "Zones to create subnets in (at most 4)."
  type        = list(string)

  validation {
    condition     = length(var.zones) >= 1 && length(var.zones) <= 4
    error_message = "zones must name 1 to 4 availability zones."
  }
}

variable "with_nat" {
  description = "Whether nodes go to private subnets behind a NAT gateway."
  type        = bool
}

variable "public_subnet_cidrs" {
  description = "CIDR of the public subnet of each zone slot."
  type        = list(string)
}

variable "private_subnet_cidrs" {
  description = "CIDR of the private subnet of each zone slot."
  type        = list(string)
}

variable "tags" {
  description = "Tags of everything the cluster owns (with the cluster tag)."
  type        = map(string)
}

variable "public_subnet_tags" {
  description = "Tags of public subnets (cluster tag and role tags)."
  type        = map(string)
}

variable "private_subnet_tags" {
  description = "Tags of private subnets (cluster tag and role tag)."
  type        = map(string)
}

locals {
  create_vpc = var.vpc.existing_id == null
  vpc_id     = local.create_vpc ? aws_vpc.cluster[0].id : var.vpc.existing_id
  zones      = { for i, z in var.zones : z => i }
}

resource "aws_vpc" "cluster" {
  count                = local.create_vpc ? 1 : 0
  cidr_block           = var.vpc.cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(var.tags, { Name = var.prefix })
}

resource "aws_internet_gateway" "gateway" {
  count  = local.create_vpc ? 1 : 0
  vpc_id = local.vpc_id
  tags   = merge(var.tags, { Name = var.prefix })
}

data "aws_internet_gateway" "existing" {
  count = local.create_vpc ? 0 : 1
  filter {
    name   = "attachment.vpc-id"
    values = [var.vpc.existing_id]
  }
}

resource "aws_subnet" "public" {
  for_each                = local.zones
  vpc_id                  = local.vpc_id
  availability_zone       = each.key
  cidr_block              = var.public_subnet_cidrs[each.value]
  map_public_ip_on_launch = !var.with_nat
  tags                    = merge(var.public_subnet_tags, { Name = "${var.prefix}-public-${each.key}" })
}

resource "aws_subnet" "private" {
  for_each          = var.with_nat ? local.zones : {}
  vpc_id            = local.vpc_id
  availability_zone = each.key
  cidr_block        = var.private_subnet_cidrs[each.value]
  tags              = merge(var.private_subnet_tags, { Name = "${var.prefix}-private-${each.key}" })
}

resource "aws_route_table" "public" {
  vpc_id = local.vpc_id
  tags   = merge(var.tags, { Name = "${var.prefix}-public" })
}

resource "aws_route" "public_default" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = local.create_vpc ? aws_internet_gateway.gateway[0].id : data.aws_internet_gateway.existing[0].id
}

resource "aws_route_table_association" "public" {
  for_each       = aws_subnet.public
  subnet_id      = each.value.id
  route_table_id = aws_route_table.public.id
}

resource "aws_eip" "nat" {
  count  = var.with_nat ? 1 : 0
  domain = "vpc"
  tags   = merge(var.tags, { Name = "${var.prefix}-nat" })
}

resource "aws_nat_gateway" "nat" {
  count         = var.with_nat ? 1 : 0
  allocation_id = aws_eip.nat[0].id
  subnet_id     = aws_subnet.public[var.zones[0]].id
  tags          = merge(var.tags, { Name = var.prefix })
}

resource "aws_route_table" "private" {
  count  = var.with_nat ? 1 : 0
  vpc_id = local.vpc_id
  tags   = merge(var.tags, { Name = "${var.prefix}-private" })
}

resource "aws_route" "private_default" {
  count                  = var.with_nat ? 1 : 0
  route_table_id         = aws_route_table.private[0].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.nat[0].id
}

resource "aws_route_table_association" "private" {
  for_each       = aws_subnet.private
  subnet_id      = each.value.id
  route_table_id = aws_route_table.private[0].id
}

data "aws_vpc" "peer" {
  for_each = toset(var.vpc.peered_ids)
  id       = each.value
}

resource "aws_vpc_peering_connection" "peer" {
  for_each    = toset(var.vpc.peered_ids)
  vpc_id      = local.vpc_id
  peer_vpc_id = each.value
  auto_accept = true
  tags        = merge(var.tags, { Name = "${var.prefix}-${each.value}" })
}

resource "aws_route" "peer" {
  for_each = {
    for pair in setproduct(var.vpc.peered_ids, var.with_nat ? ["public", "private"] : ["public"]) :
    "${pair[0]}-${pair[1]}" => { vpc = pair[0], table = pair[1] }
  }
  route_table_id            = each.value.table == "public" ? aws_route_table.public.id : aws_route_table.private[0].id
  destination_cidr_block    = data.aws_vpc.peer[each.value.vpc].cidr_block
  vpc_peering_connection_id = aws_vpc_peering_connection.peer[each.value.vpc].id
}

output "vpc_id" {
  description = "The VPC's ID."
  value       = local.vpc_id
}

output "zone_to_subnet_id" {
  description = "The subnet nodes of each zone go to (private with NAT, else public)."
  value       = { for z, _ in local.zones : z => var.with_nat ? aws_subnet.private[z].id : aws_subnet.public[z].id }
}

output "public_subnet_ids" {
  description = "Public subnets by zone."
  value       = { for z, s in aws_subnet.public : z => s.id }
}
