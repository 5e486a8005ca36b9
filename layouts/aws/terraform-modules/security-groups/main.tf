# Security groups: the cluster group every node carries (the only one tagged with the cluster
# tag, so the CCM adds load-balancer rules to it and nowhere else) and the SSH group.

variable "prefix" {
  description = "Name stem of the groups."
  type        = string
}

variable "vpc_id" {
  description = "The cluster's VPC."
  type        = string
}

variable "ssh_allow_list" {
  description = "CIDRs allowed to SSH (and to reach the Kubernetes API)."
  type        = list(string)
}

variable "create_ssh_group" {
  description = "Whether the SSH group is created (disableDefaultSecurityGroup false)."
  type        = bool
}

variable "cluster_tags" {
  description = "Tags of the cluster group (with the cluster tag)."
  type        = map(string)
}

variable "other_tags" {
  description = "Tags of the other groups (without the cluster tag)."
  type        = map(string)
}

resource "aws_security_group" "cluster" {
  name        = "${var.prefix}-cluster"
  description = "Nodes of cluster ${var.prefix}; load-balancer rules are added here"
  vpc_id      = var.vpc_id
  tags        = merge(var.cluster_tags, { Name = "${var.prefix}-cluster" })

  ingress {
    description = "every protocol between nodes"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    self        = true
  }

  egress {
    description = "everything out"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_security_group" "ssh" {
  count       = var.create_ssh_group ? 1 : 0
  name        = "${var.prefix}-ssh"
  description = "SSH and the Kubernetes API from the allow list of cluster ${var.prefix}"
  vpc_id      = var.vpc_id
  tags        = merge(var.other_tags, { Name = "${var.prefix}-ssh" })

  ingress {
    description = "SSH"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = var.ssh_allow_list
  }

  ingress {
    description = "Kubernetes API"
    from_port   = 6443
    to_port     = 6443
    protocol    = "tcp"
    cidr_blocks = var.ssh_allow_list
  }
}

output "cluster_group_id" {
  description = "The cluster group."
  value       = aws_security_group.cluster.id
}

output "ssh_group_ids" {
  description = "The SSH group (empty when disabled)."
  value       = aws_security_group.ssh[*].id
}
