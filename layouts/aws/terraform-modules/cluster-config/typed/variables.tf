# The AWSClusterConfiguration typed as the layouts read it, with Deckhouse's defaults and the checks
# of its values. cluster-config passes the document here once it has refused unknown fields (a
# typed variable drops them without a word).

variable "providerClusterConfiguration" {
  description = "The AWSClusterConfiguration document (deckhouse.io/v1), every field the layouts act on where Deckhouse puts it, with Deckhouse's defaults: layout, networks, access lists, IAM, the bastion and the master and node groups. dhctl's own fields (apiVersion, kind, nodeGroups[].nodeTemplate) pass cluster-config's field check and are left to dhctl."
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
    nodeNetworkCIDR             = optional(string)
    peeredVPCs                  = optional(list(string), [])
    disableDefaultSecurityGroup = optional(bool, false)
    sshAllowList                = optional(list(string))
    publicNetworkAllowList      = optional(list(string))
    tags                        = optional(map(string), {})
    zones                       = optional(list(string))
    additionalRolePolicies      = optional(list(string))
    iamNodeRole                 = optional(string)
    standard                    = optional(object({}))
    withoutNAT                  = optional(object({}))
    withNAT = optional(object({
      bastionInstance = optional(object({
        zone = optional(string)
        instanceClass = object({
          instanceType             = string
          ami                      = string
          additionalSecurityGroups = optional(list(string), [])
          diskType                 = optional(string, "gp2")
          diskSizeGb               = optional(number, 20)
        })
        additionalTags = optional(map(string), {})
      }))
    }))
    masterNodeGroup = object({
      replicas = number
      zones    = optional(list(string))
      instanceClass = object({
        instanceType             = string
        ami                      = string
        additionalSecurityGroups = optional(list(string), [])
        diskType                 = optional(string, "gp2")
        diskSizeGb               = optional(number, 20)
        etcdDisk = optional(object({
          sizeGb = optional(number, 20)
          type   = optional(string, "gp3")
        }), {})
      })
      additionalTags = optional(map(string), {})
    })
    nodeGroups = optional(list(object({
      name     = string
      replicas = number
      zones    = optional(list(string))
      instanceClass = object({
        instanceType             = string
        ami                      = string
        additionalSecurityGroups = optional(list(string), [])
        diskType                 = optional(string, "gp2")
        diskSizeGb               = optional(number, 20)
      })
      additionalTags = optional(map(string), {})
    })), [])
  })

  validation {
    condition     = contains(["WithoutNAT", "WithNAT", "Standard"], var.providerClusterConfiguration.layout)
    error_message = "providerClusterConfiguration.layout must be WithoutNAT, WithNAT or Standard (deprecated)."
  }
  validation {
    condition     = (var.providerClusterConfiguration.vpcNetworkCIDR == null) != (var.providerClusterConfiguration.existingVPCID == null)
    error_message = "providerClusterConfiguration: set exactly one of vpcNetworkCIDR (a new VPC) and existingVPCID."
  }
  validation {
    condition     = alltrue([for c in [var.providerClusterConfiguration.vpcNetworkCIDR, var.providerClusterConfiguration.nodeNetworkCIDR] : c == null ? true : can(regex("^(([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\\.){3}([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])/(3[0-2]|[1-2][0-9]|[0-9])$", c))])
    error_message = "providerClusterConfiguration.vpcNetworkCIDR and nodeNetworkCIDR must be IPv4 CIDRs such as 10.241.0.0/16."
  }
  validation {
    condition     = alltrue([for cidr in concat(coalesce(var.providerClusterConfiguration.sshAllowList, []), coalesce(var.providerClusterConfiguration.publicNetworkAllowList, [])) : can(cidrnetmask(cidr))])
    error_message = "providerClusterConfiguration.sshAllowList and publicNetworkAllowList must hold IPv4 CIDRs such as 203.0.113.0/24."
  }
  validation {
    condition     = var.providerClusterConfiguration.additionalRolePolicies == null ? true : length(var.providerClusterConfiguration.additionalRolePolicies) >= 1 && alltrue([for a in var.providerClusterConfiguration.additionalRolePolicies : can(regex("^([a-zA-Z0-9_-]+):([a-zA-Z0-9_*?-]+)$", a))])
    error_message = "providerClusterConfiguration.additionalRolePolicies must hold at least one IAM action such as ecr:ListImages."
  }
  validation {
    condition     = alltrue([for z in [var.providerClusterConfiguration.zones, var.providerClusterConfiguration.masterNodeGroup.zones] : z == null ? true : length(z) >= 1 && length(distinct(z)) == length(z)])
    error_message = "providerClusterConfiguration.zones and masterNodeGroup.zones must name at least one zone, each once."
  }
  validation {
    condition     = alltrue([for ng in var.providerClusterConfiguration.nodeGroups : ng.zones == null ? true : length(ng.zones) >= 1 && length(distinct(ng.zones)) == length(ng.zones)])
    error_message = "providerClusterConfiguration.nodeGroups[].zones must name at least one zone, each once."
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
      ) : contains(["gp3", "gp2", "io2", "io1", "st1", "sc1"], ic.diskType) && floor(ic.diskSizeGb) == ic.diskSizeGb
    ])
    error_message = "instanceClass.diskType (masterNodeGroup, nodeGroups, withNAT.bastionInstance) must be one of gp3, gp2, io2, io1, st1, sc1, and diskSizeGb a whole number."
  }
  validation {
    condition     = alltrue([for ng in var.providerClusterConfiguration.nodeGroups : floor(ng.replicas) == ng.replicas]) && length(distinct([for ng in var.providerClusterConfiguration.nodeGroups : ng.name])) == length(var.providerClusterConfiguration.nodeGroups)
    error_message = "providerClusterConfiguration.nodeGroups: names must be unique and replicas whole numbers."
  }
}
