# The inputs dhctl passes to every AWS layout module. This file is the single source: each
# layout module links to it (variables.tf).

variable "clusterConfiguration" {
  description = "The ClusterConfiguration document: cloud.prefix names every cloud resource; podSubnetCIDR is routed to the nodes by the CCM."
  type = object({
    cloud = object({
      prefix = string
    })
    podSubnetCIDR = string
  })

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$", var.clusterConfiguration.cloud.prefix))
    error_message = "clusterConfiguration.cloud.prefix must be 1 to 40 lowercase letters, digits or '-', starting and ending with a letter or digit."
  }
  validation {
    condition     = can(cidrnetmask(var.clusterConfiguration.podSubnetCIDR))
    error_message = "clusterConfiguration.podSubnetCIDR must be an IPv4 CIDR such as 10.111.0.0/16."
  }
}

variable "providerClusterConfiguration" {
  description = "The AWSClusterConfiguration document (deckhouse.io/v1): layout, networks, access lists, IAM and the master and node groups."
  type = object({
    layout       = string
    sshPublicKey = string
    provider = object({
      providerAccessKeyId     = string
      providerSecretAccessKey = string
      region                  = string
    })
    vpcNetworkCIDR              = optional(string)
    existingVPCID               = optional(string)
    nodeNetworkCIDR             = string
    peeredVPCs                  = optional(list(string), [])
    disableDefaultSecurityGroup = optional(bool, false)
    sshAllowList                = optional(list(string), ["0.0.0.0/0"])
    tags                        = optional(map(string), {})
    zones                       = optional(list(string), [])
    additionalRolePolicies      = optional(list(string), [])
    iamNodeRole                 = optional(string)
    withNAT = optional(object({
      bastionInstance = optional(object({
        zone = optional(string)
        instanceClass = object({
          instanceType = string
          ami          = string
          diskType     = optional(string, "gp3")
          diskSizeGb   = optional(number, 20)
        })
      }))
    }))
    masterNodeGroup = object({
      replicas = number
      zones    = optional(list(string), [])
      instanceClass = object({
        instanceType             = string
        ami                      = string
        additionalSecurityGroups = optional(list(string), [])
        diskType                 = optional(string, "gp3")
        diskSizeGb               = optional(number, 50)
        etcdDisk = optional(object({
          sizeGb = optional(number, 20)
          type   = optional(string, "gp3")
        }), {})
        additionalTags = optional(map(string), {})
      })
    })
    nodeGroups = optional(list(object({
      name     = string
      replicas = number
      zones    = optional(list(string), [])
      instanceClass = object({
        instanceType             = string
        ami                      = string
        additionalSecurityGroups = optional(list(string), [])
        diskType                 = optional(string, "gp3")
        diskSizeGb               = optional(number, 50)
        additionalTags           = optional(map(string), {})
      })
    })), [])
  })

  validation {
    condition     = contains(["WithoutNAT", "WithNAT"], var.providerClusterConfiguration.layout)
    error_message = "providerClusterConfiguration.layout must be WithoutNAT or WithNAT."
  }
  validation {
    condition     = can(regex("^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+", var.providerClusterConfiguration.sshPublicKey))
    error_message = "providerClusterConfiguration.sshPublicKey must be an OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-*)."
  }
  validation {
    condition     = can(regex("^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$", var.providerClusterConfiguration.provider.region)) && var.providerClusterConfiguration.provider.providerAccessKeyId != "" && var.providerClusterConfiguration.provider.providerSecretAccessKey != ""
    error_message = "providerClusterConfiguration.provider: region must be an AWS region such as eu-central-1, and providerAccessKeyId and providerSecretAccessKey must be set."
  }
  validation {
    condition     = (var.providerClusterConfiguration.vpcNetworkCIDR == null) != (var.providerClusterConfiguration.existingVPCID == null)
    error_message = "providerClusterConfiguration: set exactly one of vpcNetworkCIDR (a new VPC) and existingVPCID."
  }
  validation {
    condition     = var.providerClusterConfiguration.vpcNetworkCIDR == null ? true : can(cidrnetmask(var.providerClusterConfiguration.vpcNetworkCIDR))
    error_message = "providerClusterConfiguration.vpcNetworkCIDR must be an IPv4 CIDR such as 10.241.0.0/16."
  }
  validation {
    condition     = var.providerClusterConfiguration.existingVPCID == null ? true : can(regex("^vpc-[0-9a-f]{8,17}$", var.providerClusterConfiguration.existingVPCID))
    error_message = "providerClusterConfiguration.existingVPCID must be a VPC ID such as vpc-0123456789abcdef0."
  }
  validation {
    condition     = can(cidrnetmask(var.providerClusterConfiguration.nodeNetworkCIDR)) && tonumber(split("/", var.providerClusterConfiguration.nodeNetworkCIDR)[1]) <= 24
    error_message = "providerClusterConfiguration.nodeNetworkCIDR must be an IPv4 CIDR of /24 or larger: it is cut into 8 subnets (a public and a private one for up to 4 zones)."
  }
  validation {
    condition     = alltrue([for id in var.providerClusterConfiguration.peeredVPCs : can(regex("^vpc-[0-9a-f]{8,17}$", id))])
    error_message = "providerClusterConfiguration.peeredVPCs must hold VPC IDs such as vpc-0123456789abcdef0."
  }
  validation {
    condition     = alltrue([for cidr in var.providerClusterConfiguration.sshAllowList : can(cidrnetmask(cidr))])
    error_message = "providerClusterConfiguration.sshAllowList must hold IPv4 CIDRs such as 203.0.113.0/24."
  }
  validation {
    condition     = alltrue([for k in keys(var.providerClusterConfiguration.tags) : !startswith(k, "kubernetes.io/cluster/") && !startswith(k, "aws:")])
    error_message = "providerClusterConfiguration.tags must not set kubernetes.io/cluster/* (the layouts own the cluster tag) or aws:* keys."
  }
  validation {
    condition     = alltrue([for z in concat(var.providerClusterConfiguration.zones, var.providerClusterConfiguration.masterNodeGroup.zones) : startswith(z, var.providerClusterConfiguration.provider.region)])
    error_message = "providerClusterConfiguration: every zone (zones, masterNodeGroup.zones) must be in the region, such as eu-central-1a for eu-central-1."
  }
  validation {
    condition     = alltrue([for a in var.providerClusterConfiguration.additionalRolePolicies : can(regex("^[a-z0-9-]+:[A-Za-z0-9*]+$", a))])
    error_message = "providerClusterConfiguration.additionalRolePolicies must hold IAM actions such as ec2:DescribeVolumes."
  }
  validation {
    condition     = var.providerClusterConfiguration.iamNodeRole == null ? true : can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", var.providerClusterConfiguration.iamNodeRole))
    error_message = "providerClusterConfiguration.iamNodeRole must be the name of an IAM role (up to 64 of A-Z a-z 0-9 +=,.@_-)."
  }
  validation {
    condition     = var.providerClusterConfiguration.layout != "WithNAT" || try(var.providerClusterConfiguration.withNAT.bastionInstance, null) != null
    error_message = "providerClusterConfiguration.withNAT.bastionInstance is required with layout WithNAT: nodes have no public address, dhctl reaches them through the bastion."
  }
  validation {
    condition     = var.providerClusterConfiguration.masterNodeGroup.replicas >= 1 && floor(var.providerClusterConfiguration.masterNodeGroup.replicas) == var.providerClusterConfiguration.masterNodeGroup.replicas
    error_message = "providerClusterConfiguration.masterNodeGroup.replicas must be a whole number of at least 1."
  }
  validation {
    condition = alltrue([
      for ic in concat(
        [var.providerClusterConfiguration.masterNodeGroup.instanceClass],
        [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass],
        try([var.providerClusterConfiguration.withNAT.bastionInstance.instanceClass], []),
      ) : can(regex("^ami-[0-9a-f]{8,17}$", ic.ami)) && can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", ic.instanceType)) && contains(["gp3", "gp2", "io1", "io2", "st1", "sc1"], ic.diskType) && ic.diskSizeGb >= 8
    ])
    error_message = "instanceClass (master, node groups, bastion): ami must be an AMI ID such as ami-0123456789abcdef0, instanceType an EC2 type such as m5.large, diskType one of gp3, gp2, io1, io2, st1, sc1, and diskSizeGb at least 8."
  }
  validation {
    condition     = contains(["gp3", "gp2", "io1", "io2"], var.providerClusterConfiguration.masterNodeGroup.instanceClass.etcdDisk.type) && var.providerClusterConfiguration.masterNodeGroup.instanceClass.etcdDisk.sizeGb >= 10
    error_message = "masterNodeGroup.instanceClass.etcdDisk: type must be an SSD type (gp3, gp2, io1, io2) and sizeGb at least 10."
  }
  validation {
    condition     = alltrue([for ng in var.providerClusterConfiguration.nodeGroups : can(regex("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$", ng.name)) && ng.replicas >= 0]) && length(distinct([for ng in var.providerClusterConfiguration.nodeGroups : ng.name])) == length(var.providerClusterConfiguration.nodeGroups)
    error_message = "providerClusterConfiguration.nodeGroups: names must be unique DNS labels (at most 42 characters) and replicas must not be negative."
  }
}

variable "clusterUUID" {
  description = "The cluster's UUID: the cluster ID of the tag kubernetes.io/cluster/<clusterUUID> (the CCM's KubernetesClusterID)."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", var.clusterUUID))
    error_message = "clusterUUID must be a lowercase UUID such as 3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b."
  }
}

variable "nodeIndex" {
  description = "Index of the node within its group (master-node and static-node); picks its name and zone."
  type        = number
  default     = 0

  validation {
    condition     = var.nodeIndex >= 0 && floor(var.nodeIndex) == var.nodeIndex
    error_message = "nodeIndex must be a whole number of at least 0."
  }
}

variable "cloudConfig" {
  description = "Base64 cloud-init user data of the node (master-node and static-node); empty for none."
  type        = string
  default     = ""

  validation {
    condition     = var.cloudConfig == "" || can(base64decode(var.cloudConfig))
    error_message = "cloudConfig must be base64-encoded user data."
  }
}

variable "nodeGroupName" {
  description = "Name of the node group of a static node (static-node); one of providerClusterConfiguration.nodeGroups."
  type        = string
  default     = ""

  validation {
    condition     = var.nodeGroupName == "" || contains([for ng in var.providerClusterConfiguration.nodeGroups : ng.name], var.nodeGroupName)
    error_message = "nodeGroupName must name one of providerClusterConfiguration.nodeGroups."
  }
}
