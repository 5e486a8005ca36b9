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
  description = "The AWSClusterConfiguration document (deckhouse.io/v1) as dhctl passes it. Untyped here, so that no field is dropped unseen: cluster-config refuses a field Deckhouse's schema does not have, naming it (fields.tf), then types the document with Deckhouse's defaults and checks its values (typed/variables.tf)."
  type        = any

  validation {
    condition     = can(keys(var.providerClusterConfiguration))
    error_message = "providerClusterConfiguration must be an object: the AWSClusterConfiguration document."
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
    condition     = var.nodeGroupName == "" || contains(try([for ng in var.providerClusterConfiguration.nodeGroups : ng.name], []), var.nodeGroupName)
    error_message = "nodeGroupName must name one of providerClusterConfiguration.nodeGroups."
  }
}
