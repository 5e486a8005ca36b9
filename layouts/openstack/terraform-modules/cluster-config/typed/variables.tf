# The OpenStackClusterConfiguration typed as the layouts read it, with Deckhouse's defaults and the
# checks of its values. cluster-config passes the document here once it has refused unknown fields
# (a typed variable drops them without a word).

variable "providerClusterConfiguration" {
  description = "The OpenStackClusterConfiguration document (deckhouse.io/v1) typed: layout, connection, master and node groups, and the section of the chosen layout; dhctl's own fields (apiVersion, kind, nodeGroups[].nodeTemplate) pass cluster-config's field check and are left to dhctl."
  type = object({
    layout       = string
    sshPublicKey = string
    sshAllowList = optional(list(string), ["0.0.0.0/0"])
    tags         = optional(map(string), {})
    zones        = optional(list(string), [])
    provider = object({
      authURL    = string
      caCert     = optional(string, "")
      domainName = string
      tenantName = optional(string)
      tenantID   = optional(string)
      username   = string
      password   = string
      region     = string
    })
    masterNodeGroup = object({
      replicas = number
      instanceClass = object({
        flavorName               = string
        imageName                = string
        rootDiskSize             = optional(number)
        etcdDiskSizeGb           = optional(number, 10)
        additionalSecurityGroups = optional(list(string), [])
        additionalTags           = optional(map(string), {})
      })
      volumeTypeMap = map(string)
      serverGroup = optional(object({
        policy = string
        manuallyManaged = optional(object({
          id = string
        }))
      }))
    })
    nodeGroups = optional(list(object({
      name          = string
      replicas      = number
      zones         = optional(list(string), [])
      volumeTypeMap = optional(map(string), {})
      instanceClass = object({
        flavorName                   = string
        imageName                    = string
        rootDiskSize                 = optional(number)
        configDrive                  = optional(bool, false)
        mainNetwork                  = string
        additionalNetworks           = optional(list(string), [])
        networksWithSecurityDisabled = optional(list(string), [])
        floatingIPPools              = optional(list(string), [])
        additionalSecurityGroups     = optional(list(string), [])
        additionalTags               = optional(map(string), {})
      })
    })), [])
    standard = optional(object({
      internalNetworkCIDR       = string
      internalNetworkDNSServers = list(string)
      internalNetworkSecurity   = optional(bool, true)
      externalNetworkName       = string
      bastion = optional(object({
        zone       = optional(string)
        volumeType = optional(string)
        instanceClass = object({
          flavorName     = string
          imageName      = string
          rootDiskSize   = optional(number, 50)
          additionalTags = optional(map(string), {})
        })
      }))
    }))
    standardWithNoRouter = optional(object({
      internalNetworkCIDR     = string
      externalNetworkName     = string
      externalNetworkDHCP     = optional(bool, true)
      internalNetworkSecurity = optional(bool, true)
    }))
    simple = optional(object({
      externalNetworkName = string
      externalNetworkDHCP = optional(bool, true)
      podNetworkMode      = optional(string, "VXLAN")
    }))
    simpleWithInternalNetwork = optional(object({
      internalSubnetName           = string
      podNetworkMode               = optional(string, "DirectRoutingWithPortSecurityEnabled")
      externalNetworkName          = optional(string)
      externalNetworkDHCP          = optional(bool, true)
      masterWithExternalFloatingIP = optional(bool, true)
    }))
  })

  validation {
    condition     = contains(["Standard", "StandardWithNoRouter", "Simple", "SimpleWithInternalNetwork"], var.providerClusterConfiguration.layout)
    error_message = "providerClusterConfiguration.layout must be one of Standard, StandardWithNoRouter, Simple, SimpleWithInternalNetwork."
  }
  validation {
    condition = lookup({
      Standard                  = var.providerClusterConfiguration.standard != null
      StandardWithNoRouter      = var.providerClusterConfiguration.standardWithNoRouter != null
      Simple                    = var.providerClusterConfiguration.simple != null
      SimpleWithInternalNetwork = var.providerClusterConfiguration.simpleWithInternalNetwork != null
    }, var.providerClusterConfiguration.layout, true)
    error_message = "providerClusterConfiguration: the section of the chosen layout is missing (standard, standardWithNoRouter, simple or simpleWithInternalNetwork)."
  }
  validation {
    condition     = can(regex("^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+", var.providerClusterConfiguration.sshPublicKey))
    error_message = "providerClusterConfiguration.sshPublicKey must be an OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-*)."
  }
  validation {
    condition     = alltrue([for cidr in var.providerClusterConfiguration.sshAllowList : can(cidrnetmask(cidr))])
    error_message = "providerClusterConfiguration.sshAllowList must hold IPv4 CIDRs such as 203.0.113.0/24."
  }
  validation {
    condition     = can(regex("^https?://", var.providerClusterConfiguration.provider.authURL))
    error_message = "providerClusterConfiguration.provider.authURL must be an http:// or https:// Keystone URL."
  }
  validation {
    condition     = (var.providerClusterConfiguration.provider.tenantName == null) != (var.providerClusterConfiguration.provider.tenantID == null)
    error_message = "providerClusterConfiguration.provider: set exactly one of tenantName and tenantID."
  }
  validation {
    condition     = var.providerClusterConfiguration.masterNodeGroup.replicas >= 1 && floor(var.providerClusterConfiguration.masterNodeGroup.replicas) == var.providerClusterConfiguration.masterNodeGroup.replicas
    error_message = "providerClusterConfiguration.masterNodeGroup.replicas must be a whole number of at least 1."
  }
  validation {
    condition     = length(var.providerClusterConfiguration.masterNodeGroup.volumeTypeMap) > 0
    error_message = "providerClusterConfiguration.masterNodeGroup.volumeTypeMap must map at least one zone to a volume type (zone: type)."
  }
  validation {
    condition     = var.providerClusterConfiguration.masterNodeGroup.instanceClass.etcdDiskSizeGb >= 1 && var.providerClusterConfiguration.masterNodeGroup.instanceClass.flavorName != "" && var.providerClusterConfiguration.masterNodeGroup.instanceClass.imageName != ""
    error_message = "providerClusterConfiguration.masterNodeGroup.instanceClass needs a flavorName, an imageName and an etcdDiskSizeGb of at least 1."
  }
  validation {
    condition     = var.providerClusterConfiguration.masterNodeGroup.serverGroup == null ? true : contains(["AntiAffinity", "ManuallyManaged"], var.providerClusterConfiguration.masterNodeGroup.serverGroup.policy)
    error_message = "providerClusterConfiguration.masterNodeGroup.serverGroup.policy must be AntiAffinity or ManuallyManaged."
  }
  validation {
    condition     = try(var.providerClusterConfiguration.masterNodeGroup.serverGroup.policy, "") != "ManuallyManaged" ? true : try(var.providerClusterConfiguration.masterNodeGroup.serverGroup.manuallyManaged.id, "") != ""
    error_message = "providerClusterConfiguration.masterNodeGroup.serverGroup.manuallyManaged.id is required with policy ManuallyManaged."
  }
  validation {
    condition     = alltrue([for ng in var.providerClusterConfiguration.nodeGroups : can(regex("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$", ng.name)) && ng.replicas >= 0])
    error_message = "providerClusterConfiguration.nodeGroups: every name must be a DNS label (lowercase letters, digits, '-', at most 42 characters) and replicas must not be negative."
  }
  validation {
    condition     = length(distinct([for ng in var.providerClusterConfiguration.nodeGroups : ng.name])) == length(var.providerClusterConfiguration.nodeGroups)
    error_message = "providerClusterConfiguration.nodeGroups: names must be unique."
  }
  validation {
    condition     = var.providerClusterConfiguration.standard == null ? true : can(cidrnetmask(var.providerClusterConfiguration.standard.internalNetworkCIDR)) && alltrue([for ip in var.providerClusterConfiguration.standard.internalNetworkDNSServers : can(cidrnetmask("${ip}/32"))])
    error_message = "providerClusterConfiguration.standard: internalNetworkCIDR must be an IPv4 CIDR and internalNetworkDNSServers IPv4 addresses."
  }
  validation {
    condition     = var.providerClusterConfiguration.standardWithNoRouter == null ? true : can(cidrnetmask(var.providerClusterConfiguration.standardWithNoRouter.internalNetworkCIDR))
    error_message = "providerClusterConfiguration.standardWithNoRouter.internalNetworkCIDR must be an IPv4 CIDR."
  }
  validation {
    condition     = contains(["VXLAN", "DirectRouting"], try(var.providerClusterConfiguration.simple.podNetworkMode, "VXLAN"))
    error_message = "providerClusterConfiguration.simple.podNetworkMode must be VXLAN or DirectRouting."
  }
  validation {
    condition     = contains(["VXLAN", "DirectRouting", "DirectRoutingWithPortSecurityEnabled"], try(var.providerClusterConfiguration.simpleWithInternalNetwork.podNetworkMode, "VXLAN"))
    error_message = "providerClusterConfiguration.simpleWithInternalNetwork.podNetworkMode must be VXLAN, DirectRouting or DirectRoutingWithPortSecurityEnabled."
  }
  validation {
    condition     = try(var.providerClusterConfiguration.simpleWithInternalNetwork.masterWithExternalFloatingIP, false) == false ? true : try(var.providerClusterConfiguration.simpleWithInternalNetwork.externalNetworkName, null) != null
    error_message = "providerClusterConfiguration.simpleWithInternalNetwork.externalNetworkName is required when masterWithExternalFloatingIP is true."
  }
}
