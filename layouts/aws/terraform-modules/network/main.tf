# The network of a cluster, as Deckhouse's layouts build it: one public subnet per zone of the
# whole region (nodeNetworkCIDR, else the VPC's CIDR, cut into equal parts), with an internal
# subnet per zone behind a NAT gateway in WithNAT and Standard; the internet gateway, route
# tables, and VPC peerings with routes both ways. Resource names are Deckhouse's, so the layouts move Deckhouse's
# state here with `moved` blocks. Subnets carry the role tags and the cluster tags, and the route
# table the CCM adds pod routes to carries the cluster tags.

variable "prefix" {
  description = "Name stem of every resource."
  type        = string
}

variable "vpc_id" {
  description = "The cluster's VPC."
  type        = string
}

variable "subnet_cidr" {
  description = "The range cut into subnets: nodeNetworkCIDR, else the VPC's CIDR."
  type        = string
}

variable "zones" {
  description = "Every zone of the region, in the region's order: one subnet (pair) each."
  type        = list(string)

  validation {
    condition     = length(var.zones) >= 1
    error_message = "zones must name at least one availability zone of the region."
  }
}

variable "internal_subnet" {
  description = "Whether internal subnets behind a NAT gateway are created (WithNAT, Standard)."
  type        = bool
}

variable "peered_vpc_ids" {
  description = "VPCs of this account and region to peer with (peeredVPCs)."
  type        = list(string)
}

variable "region" {
  description = "The region of the VPC and its peers."
  type        = string
}

variable "vpc_cidr" {
  description = "The VPC's CIDR: the peers route it to the peering."
  type        = string
}

variable "tags" {
  description = "The configured tags."
  type        = map(string)
}

variable "cluster_tags" {
  description = "The configured tags and the cluster tags."
  type        = map(string)
}

variable "public_subnet_tags" {
  description = "Tags of public subnets (cluster tags and role tags)."
  type        = map(string)
}

variable "internal_subnet_tags" {
  description = "Tags of internal subnets (cluster tags and role tag)."
  type        = map(string)
}

locals {
  # The world: the default routes.
  anywhere = "0.0.0.0/0"
  az_count = length(var.zones)
  # Public subnets take the first parts, internal ones the parts after them.
  newbits = ceil(log(local.az_count * (var.internal_subnet ? 2 : 1), 2))
  # The route table the CCM adds pod routes to: where the nodes are.
  nodes_table_tags = var.internal_subnet ? var.tags : var.cluster_tags
}

resource "aws_subnet" "kube_public" {
  count                   = local.az_count
  vpc_id                  = var.vpc_id
  availability_zone       = var.zones[count.index]
  cidr_block              = cidrsubnet(var.subnet_cidr, local.newbits, count.index)
  map_public_ip_on_launch = true
  tags                    = merge(var.public_subnet_tags, { Name = "${var.prefix}-public-${count.index}" })
}

resource "aws_subnet" "kube_internal" {
  count                   = var.internal_subnet ? local.az_count : 0
  vpc_id                  = var.vpc_id
  availability_zone       = var.zones[count.index]
  cidr_block              = cidrsubnet(var.subnet_cidr, local.newbits, count.index + local.az_count)
  map_public_ip_on_launch = false
  tags                    = merge(var.internal_subnet_tags, { Name = "${var.prefix}-internal-${count.index}" })
}

resource "aws_internet_gateway" "kube" {
  vpc_id = var.vpc_id
  tags   = merge(var.tags, { Name = var.prefix })
}

resource "aws_route_table" "kube_public" {
  vpc_id = var.vpc_id
  tags   = merge(local.nodes_table_tags, { Name = "${var.prefix}-public" })
}

resource "aws_route" "internet_access_public" {
  route_table_id         = aws_route_table.kube_public.id
  destination_cidr_block = local.anywhere
  gateway_id             = aws_internet_gateway.kube.id
}

resource "aws_route_table_association" "kube_public" {
  count          = local.az_count
  subnet_id      = aws_subnet.kube_public[count.index].id
  route_table_id = aws_route_table.kube_public.id
}

resource "aws_eip" "natgw" {
  count  = var.internal_subnet ? 1 : 0
  domain = "vpc"
  tags   = merge(var.tags, { Name = "${var.prefix}-natgw" })
}

resource "aws_nat_gateway" "kube" {
  count         = var.internal_subnet ? 1 : 0
  allocation_id = aws_eip.natgw[0].id
  subnet_id     = aws_subnet.kube_public[0].id
  tags          = merge(var.tags, { Name = var.prefix })
}

resource "aws_route_table" "kube_internal" {
  count  = var.internal_subnet ? 1 : 0
  vpc_id = var.vpc_id
  tags   = merge(var.cluster_tags, { Name = "${var.prefix}-internal" })
}

resource "aws_route" "internet_access_internal" {
  count                  = var.internal_subnet ? 1 : 0
  route_table_id         = aws_route_table.kube_internal[0].id
  destination_cidr_block = local.anywhere
  nat_gateway_id         = aws_nat_gateway.kube[0].id
}

resource "aws_route_table_association" "kube_internal" {
  count          = var.internal_subnet ? local.az_count : 0
  subnet_id      = aws_subnet.kube_internal[count.index].id
  route_table_id = aws_route_table.kube_internal[0].id
}

# VPC peerings as Deckhouse makes them (same account and region): the request, its acceptance,
# a route to each peer from the nodes' route table, and a route back from the route table of
# the peer's first subnet. Count-indexed, in peeredVPCs' order, at Deckhouse's names, so
# moved.tf takes Deckhouse's peerings over.
data "aws_caller_identity" "kube" {}

data "aws_vpc" "target" {
  count = length(var.peered_vpc_ids)
  id    = var.peered_vpc_ids[count.index]
}

data "aws_subnets" "target" {
  count = length(var.peered_vpc_ids)
  filter {
    name   = "vpc-id"
    values = [var.peered_vpc_ids[count.index]]
  }
}

data "aws_route_table" "target" {
  count     = length(var.peered_vpc_ids)
  subnet_id = data.aws_subnets.target[count.index].ids[0]
}

resource "aws_vpc_peering_connection" "kube" {
  count         = length(var.peered_vpc_ids)
  vpc_id        = var.vpc_id
  peer_vpc_id   = var.peered_vpc_ids[count.index]
  peer_owner_id = data.aws_caller_identity.kube.account_id
  peer_region   = var.region
  auto_accept   = false
  tags          = merge(var.tags, { Name = var.prefix })
}

resource "aws_vpc_peering_connection_accepter" "kube" {
  count                     = length(var.peered_vpc_ids)
  vpc_peering_connection_id = aws_vpc_peering_connection.kube[count.index].id
  auto_accept               = true
  tags                      = merge(var.tags, { Name = var.prefix })
}

resource "aws_route" "kube" {
  count                     = length(var.peered_vpc_ids)
  route_table_id            = var.internal_subnet ? aws_route_table.kube_internal[0].id : aws_route_table.kube_public.id
  destination_cidr_block    = data.aws_vpc.target[count.index].cidr_block
  vpc_peering_connection_id = aws_vpc_peering_connection.kube[count.index].id
}

resource "aws_route" "target" {
  count                     = length(var.peered_vpc_ids)
  route_table_id            = data.aws_route_table.target[count.index].id
  destination_cidr_block    = var.vpc_cidr
  vpc_peering_connection_id = aws_vpc_peering_connection.kube[count.index].id
}

output "zone_to_public_subnet_id" {
  description = "The public subnet of each zone."
  value       = { for s in aws_subnet.kube_public : s.availability_zone => s.id }
}

output "zone_to_internal_subnet_id" {
  description = "The internal subnet of each zone (empty without internal subnets)."
  value       = { for s in aws_subnet.kube_internal : s.availability_zone => s.id }
}
