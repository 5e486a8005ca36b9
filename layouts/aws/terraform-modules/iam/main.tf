# IAM: the masters' role runs the cloud-controller-manager, so it carries exactly the policy of
# deploy/iam-policy.json (cloud-controller-manager-policy.json here, checked identical) plus
# additionalRolePolicies; nodes get a small role (image pulls for the ECR credential provider)
# unless iamNodeRole names an existing one.

variable "prefix" {
  description = "Name stem of the roles and instance profiles."
  type        = string
}

variable "additional_role_policies" {
  description = "Extra IAM actions for the masters' role (additionalRolePolicies)."
  type        = list(string)
}

variable "node_role" {
  description = "An existing role for the nodes (iamNodeRole), or null to create one."
  type        = string
}

variable "tags" {
  description = "Tags of the roles and profiles."
  type        = map(string)
}

locals {
  # EC2 instances may take the roles.
  assume_by_ec2 = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "ec2.amazonaws.com" } }]
  })
}

resource "aws_iam_role" "master" {
  name               = "${var.prefix}-master"
  assume_role_policy = local.assume_by_ec2
  tags               = var.tags
}

resource "aws_iam_role_policy" "cloud_controller_manager" {
  name   = "${var.prefix}-cloud-controller-manager"
  role   = aws_iam_role.master.id
  policy = file("${path.module}/cloud-controller-manager-policy.json")
}

resource "aws_iam_role_policy" "additional" {
  count = length(var.additional_role_policies) > 0 ? 1 : 0
  name  = "${var.prefix}-additional"
  role  = aws_iam_role.master.id
  policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = var.additional_role_policies, Resource = "*" }]
  })
}

resource "aws_iam_instance_profile" "master" {
  name = "${var.prefix}-master"
  role = aws_iam_role.master.name
  tags = var.tags
}

resource "aws_iam_role" "node" {
  count              = var.node_role == null ? 1 : 0
  name               = "${var.prefix}-node"
  assume_role_policy = local.assume_by_ec2
  tags               = var.tags
}

resource "aws_iam_role_policy" "node" {
  count  = var.node_role == null ? 1 : 0
  name   = "${var.prefix}-node"
  role   = aws_iam_role.node[0].id
  policy = file("${path.module}/node-policy.json")
}

resource "aws_iam_instance_profile" "node" {
  name = "${var.prefix}-node"
  role = var.node_role == null ? aws_iam_role.node[0].name : var.node_role
  tags = var.tags
}

output "master_profile" {
  description = "Instance profile of the masters."
  value       = aws_iam_instance_profile.master.name
}

output "node_profile" {
  description = "Instance profile of the other nodes."
  value       = aws_iam_instance_profile.node.name
}
