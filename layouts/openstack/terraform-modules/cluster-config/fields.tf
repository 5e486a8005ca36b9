# Deckhouse's OpenStackClusterConfiguration schema fixes the fields of its objects
# (additionalProperties: false); a typed OpenTofu variable would drop an unknown one without a word
# (a misspelt externalNetworkDHCP, a field in the section of another layout's shape). Every object
# of the document is listed here with the fields it may have; any other field fails the plan, named
# by its path. Maps of free keys (tags, additionalTags, volumeTypeMap, nodeTemplate.labels and
# annotations) are not checked.

locals {
  raw = var.providerClusterConfiguration

  checked_objects = concat(
    [
      {
        path  = ""
        value = local.raw
        fields = [
          "apiVersion", "kind", "layout", "sshPublicKey", "sshAllowList", "tags", "zones", "provider",
          "masterNodeGroup", "nodeGroups", "standard", "standardWithNoRouter", "simple", "simpleWithInternalNetwork",
        ]
      },
      { path = ".provider", value = try(local.raw.provider, null), fields = ["authURL", "caCert", "domainName", "tenantName", "tenantID", "username", "password", "region"] },
      { path = ".masterNodeGroup", value = try(local.raw.masterNodeGroup, null), fields = ["replicas", "instanceClass", "volumeTypeMap", "serverGroup"] },
      { path = ".masterNodeGroup.instanceClass", value = try(local.raw.masterNodeGroup.instanceClass, null), fields = ["flavorName", "imageName", "rootDiskSize", "etcdDiskSizeGb", "additionalSecurityGroups", "additionalTags"] },
      { path = ".masterNodeGroup.serverGroup", value = try(local.raw.masterNodeGroup.serverGroup, null), fields = ["policy", "manuallyManaged"] },
      { path = ".masterNodeGroup.serverGroup.manuallyManaged", value = try(local.raw.masterNodeGroup.serverGroup.manuallyManaged, null), fields = ["id"] },
      { path = ".standard", value = try(local.raw.standard, null), fields = ["internalNetworkCIDR", "internalNetworkDNSServers", "internalNetworkSecurity", "externalNetworkName", "bastion"] },
      { path = ".standard.bastion", value = try(local.raw.standard.bastion, null), fields = ["zone", "volumeType", "instanceClass"] },
      { path = ".standard.bastion.instanceClass", value = try(local.raw.standard.bastion.instanceClass, null), fields = ["flavorName", "imageName", "rootDiskSize", "additionalTags"] },
      { path = ".standardWithNoRouter", value = try(local.raw.standardWithNoRouter, null), fields = ["internalNetworkCIDR", "externalNetworkName", "externalNetworkDHCP", "internalNetworkSecurity"] },
      { path = ".simple", value = try(local.raw.simple, null), fields = ["externalNetworkName", "externalNetworkDHCP", "podNetworkMode"] },
      { path = ".simpleWithInternalNetwork", value = try(local.raw.simpleWithInternalNetwork, null), fields = ["internalSubnetName", "podNetworkMode", "externalNetworkName", "externalNetworkDHCP", "masterWithExternalFloatingIP"] },
    ],
    try(flatten([
      for i, ng in local.raw.nodeGroups : concat(
        [
          { path = ".nodeGroups[${i}]", value = ng, fields = ["name", "replicas", "zones", "volumeTypeMap", "nodeTemplate", "instanceClass"] },
          {
            path  = ".nodeGroups[${i}].instanceClass"
            value = try(ng.instanceClass, null)
            fields = [
              "flavorName", "imageName", "rootDiskSize", "configDrive", "mainNetwork", "additionalNetworks",
              "networksWithSecurityDisabled", "floatingIPPools", "additionalSecurityGroups", "additionalTags",
            ]
          },
          { path = ".nodeGroups[${i}].nodeTemplate", value = try(ng.nodeTemplate, null), fields = ["labels", "annotations", "taints"] },
        ],
        try([for j, t in ng.nodeTemplate.taints : { path = ".nodeGroups[${i}].nodeTemplate.taints[${j}]", value = t, fields = ["effect", "key", "value"] }], []),
      )
    ]), []),
  )

  unknown_fields = flatten([
    for o in local.checked_objects : [
      for field in try(keys(o.value), []) : "providerClusterConfiguration${o.path}.${field}" if !contains(o.fields, field)
    ]
  ])
}

output "unknown_fields" {
  description = "Fields of the configuration Deckhouse's schema does not have: none, or the plan fails naming them."
  value       = local.unknown_fields

  precondition {
    condition     = length(local.unknown_fields) == 0
    error_message = "Deckhouse's OpenStackClusterConfiguration has no field ${join(", ", local.unknown_fields)}: remove it, or put it where the schema has it (a field the layouts would otherwise drop unseen)."
  }
}
