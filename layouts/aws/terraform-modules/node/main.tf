# One node instance: tagged for the CCM and the node-termination-handler, IMDSv2 reachable from
# pods (hop limit 2: the EBS CSI node plugin and the termination handler read it), source/dest
# check off (pod routes), an etcd volume for masters and an Elastic IP where asked. The names
# of the volume, its attachment and the Elastic IP and its association are those of Deckhouse's
# master-node and static-node modules, so the layouts move Deckhouse's state here.

variable "name" {
  description = "Name of the instance (tag Name)."
  type        = string
}

variable "instance_class" {
  description = "instanceClass: type, AMI, root disk, extra security groups and tags."
  type = object({
    instanceType             = string
    ami                      = string
    additionalSecurityGroups = list(string)
    diskType                 = string
    diskSizeGb               = number
  })
}

variable "additional_tags" {
  description = "additionalTags of the node's group (a sibling of instanceClass in Deckhouse's configuration)."
  type        = map(string)
  default     = {}
}

variable "etcd_disk" {
  description = "etcdDisk of a master (size and type); null for other nodes."
  type = object({
    sizeGb = number
    type   = string
  })
  default = null
}

variable "subnet_id" {
  description = "Subnet of the instance."
  type        = string
}

variable "zone" {
  description = "Zone of the subnet (and of the etcd volume)."
  type        = string
}

variable "security_group_ids" {
  description = "The cluster group first, then the SSH group when there is one."
  type        = list(string)
}

variable "iam_instance_profile" {
  description = "Instance profile."
  type        = string
}

variable "key_name" {
  description = "EC2 key pair."
  type        = string
}

variable "cloud_config" {
  description = "Base64 cloud-init user data."
  type        = string
}

variable "public_ip" {
  description = "Whether the instance gets an Elastic IP."
  type        = bool
}

variable "eip_tags" {
  description = "Tags of the Elastic IP."
  type        = map(string)
  default     = {}
}

variable "instance_tags" {
  description = "Tags of every node instance (cluster tag, node-termination-handler tag)."
  type        = map(string)
}

variable "volume_tags" {
  description = "Tags of the volumes (cluster tag)."
  type        = map(string)
}

resource "aws_instance" "node" {
  ami                    = var.instance_class.ami
  instance_type          = var.instance_class.instanceType
  subnet_id              = var.subnet_id
  key_name               = var.key_name
  iam_instance_profile   = var.iam_instance_profile
  vpc_security_group_ids = concat(var.security_group_ids, var.instance_class.additionalSecurityGroups)
  user_data_base64       = var.cloud_config == "" ? null : var.cloud_config
  source_dest_check      = false
  tags                   = merge(var.additional_tags, var.instance_tags, { Name = var.name })

  root_block_device {
    volume_type = var.instance_class.diskType
    volume_size = var.instance_class.diskSizeGb
    tags        = merge(var.additional_tags, var.volume_tags, { Name = var.name })
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
    instance_metadata_tags      = "enabled"
  }

  lifecycle {
    # The user data is dhctl's bootstrap script, which changes with the cluster's settings; a
    # new AMI is for new nodes. Deckhouse's state has user_data, ours user_data_base64.
    ignore_changes = [user_data, user_data_base64, user_data_replace_on_change, ami, ebs_optimized]
  }
}

resource "aws_ebs_volume" "kubernetes_data" {
  count             = var.etcd_disk == null ? 0 : 1
  availability_zone = var.zone
  size              = var.etcd_disk.sizeGb
  type              = var.etcd_disk.type
  tags              = merge(var.volume_tags, { Name = "${var.name}-kubernetes-data" })
}

resource "aws_volume_attachment" "kubernetes_data" {
  count        = var.etcd_disk == null ? 0 : 1
  device_name  = "/dev/xvdf"
  volume_id    = aws_ebs_volume.kubernetes_data[0].id
  instance_id  = aws_instance.node.id
  skip_destroy = true
}

resource "aws_eip" "eip" {
  count  = var.public_ip ? 1 : 0
  domain = "vpc"
  tags   = merge(var.eip_tags, { Name = var.name })
}

resource "aws_eip_association" "eip" {
  count         = var.public_ip ? 1 : 0
  instance_id   = aws_instance.node.id
  allocation_id = aws_eip.eip[0].id
}

output "private_ip" {
  description = "The instance's private address."
  value       = aws_instance.node.private_ip
}

output "ip_for_ssh" {
  description = "Its Elastic IP, else its private address."
  value       = var.public_ip ? aws_eip.eip[0].public_ip : aws_instance.node.private_ip
}

output "kubernetes_data_device_path" {
  description = "Device name of the etcd volume (masters)."
  value       = var.etcd_disk == null ? "" : aws_volume_attachment.kubernetes_data[0].device_name
}
