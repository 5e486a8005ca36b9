# Security groups as Deckhouse's layouts make them, at the same addresses: <prefix>-node (every
# node; the only group with the cluster tags, so the CCM adds its load-balancer rules there and
# nowhere else; open between nodes, from the load balancers, and to ICMP from the public allow
# list), <prefix>-loadbalancer (the CCM's ElbSecurityGroup: open to publicNetworkAllowList, out to
# the nodes) and <prefix>-ssh-accessible (SSH from sshAllowList). disableDefaultSecurityGroup
# creates none of them.

variable "prefix" {
  description = "Name stem of the groups."
  type        = string
}

variable "vpc_id" {
  description = "The cluster's VPC."
  type        = string
}

variable "create" {
  description = "Whether the groups are created (disableDefaultSecurityGroup false)."
  type        = bool
}

variable "ssh_allow_list" {
  description = "CIDRs allowed to SSH (sshAllowList); empty: no SSH group."
  type        = list(string)
}

variable "public_network_allow_list" {
  description = "CIDRs allowed to reach load balancers and to ping nodes (publicNetworkAllowList)."
  type        = list(string)
}

variable "tags" {
  description = "The configured tags (the load-balancer and SSH groups)."
  type        = map(string)
}

variable "cluster_tags" {
  description = "The configured tags and the cluster tags (the node group)."
  type        = map(string)
}

locals {
  # The world: the nodes' egress.
  anywhere   = "0.0.0.0/0"
  groups     = var.create ? 1 : 0
  ssh_groups = var.create && length(var.ssh_allow_list) > 0 ? 1 : 0
}

resource "aws_security_group" "node" {
  count  = local.groups
  name   = "${var.prefix}-node"
  vpc_id = var.vpc_id
  tags   = var.cluster_tags

  egress {
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = [local.anywhere]
  }
}

resource "aws_security_group_rule" "node-to-node" {
  count                    = local.groups
  type                     = "ingress"
  protocol                 = "-1"
  from_port                = 0
  to_port                  = 65535
  security_group_id        = aws_security_group.node[0].id
  source_security_group_id = aws_security_group.node[0].id
}

resource "aws_security_group_rule" "lb-to-node" {
  count                    = local.groups
  type                     = "ingress"
  protocol                 = "-1"
  from_port                = 0
  to_port                  = 65535
  security_group_id        = aws_security_group.node[0].id
  source_security_group_id = aws_security_group.loadbalancer[0].id
}

resource "aws_security_group_rule" "to-node-icmp" {
  count             = local.groups
  type              = "ingress"
  protocol          = "icmp"
  from_port         = -1
  to_port           = -1
  cidr_blocks       = var.public_network_allow_list
  security_group_id = aws_security_group.node[0].id
}

resource "aws_security_group" "loadbalancer" {
  count  = local.groups
  name   = "${var.prefix}-loadbalancer"
  vpc_id = var.vpc_id
  tags   = var.tags
}

resource "aws_security_group_rule" "allow-all-incoming-traffic-to-loadbalancer" {
  count             = local.groups
  type              = "ingress"
  protocol          = "-1"
  from_port         = 0
  to_port           = 65535
  cidr_blocks       = var.public_network_allow_list
  security_group_id = aws_security_group.loadbalancer[0].id
}

resource "aws_security_group_rule" "allow-all-outgoing-traffic-to-nodes" {
  count                    = local.groups
  type                     = "egress"
  protocol                 = "-1"
  from_port                = 0
  to_port                  = 65535
  security_group_id        = aws_security_group.loadbalancer[0].id
  source_security_group_id = aws_security_group.node[0].id
}

resource "aws_security_group" "ssh-accessible" {
  count  = local.ssh_groups
  name   = "${var.prefix}-ssh-accessible"
  vpc_id = var.vpc_id
  tags   = var.tags
}

resource "aws_security_group_rule" "allow-ssh-for-everyone" {
  count             = local.ssh_groups
  type              = "ingress"
  protocol          = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_blocks       = var.ssh_allow_list
  security_group_id = aws_security_group.ssh-accessible[0].id
}

output "node_group_id" {
  description = "The node group, or null when disabled."
  value       = one(aws_security_group.node[*].id)
}

output "load_balancer_group_id" {
  description = "The load-balancer group (the CCM's ElbSecurityGroup), or null when disabled."
  value       = one(aws_security_group.loadbalancer[*].id)
}

output "node_group_ids" {
  description = "The groups every node carries: the node group, then the SSH group (empty when disabled)."
  value       = concat(aws_security_group.node[*].id, aws_security_group.ssh-accessible[*].id)
}
