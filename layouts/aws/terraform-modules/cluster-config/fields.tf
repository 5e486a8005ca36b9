# Deckhouse's AWSClusterConfiguration schema fixes the fields of its objects (additionalProperties:
# false); a typed OpenTofu variable would drop an unknown one without a word (a misspelt
# additionalTags, a field put one level too deep). Every object of the document is listed here
# with the fields it may have; any other field fails the plan, named by its path. Maps of free
# keys (tags, additionalTags, nodeTemplate.labels/annotations) are not checked.

locals {
  raw = var.providerClusterConfiguration

  instance_class_fields = ["instanceType", "ami", "additionalSecurityGroups", "diskType", "diskSizeGb"]

  checked_objects = concat(
    [
      {
        path  = ""
        value = local.raw
        fields = [
          "apiVersion", "kind", "layout", "sshPublicKey", "provider", "vpcNetworkCIDR", "existingVPCID",
          "nodeNetworkCIDR", "peeredVPCs", "disableDefaultSecurityGroup", "sshAllowList",
          "publicNetworkAllowList", "tags", "zones", "additionalRolePolicies", "iamNodeRole", "standard",
          "withoutNAT", "withNAT", "masterNodeGroup", "nodeGroups",
        ]
      },
      { path = ".provider", value = try(local.raw.provider, null), fields = ["providerAccessKeyId", "providerSecretAccessKey", "region"] },
      { path = ".standard", value = try(local.raw.standard, null), fields = [] },
      { path = ".withoutNAT", value = try(local.raw.withoutNAT, null), fields = [] },
      { path = ".withNAT", value = try(local.raw.withNAT, null), fields = ["bastionInstance"] },
      { path = ".withNAT.bastionInstance", value = try(local.raw.withNAT.bastionInstance, null), fields = ["zone", "instanceClass", "additionalTags"] },
      { path = ".withNAT.bastionInstance.instanceClass", value = try(local.raw.withNAT.bastionInstance.instanceClass, null), fields = local.instance_class_fields },
      { path = ".masterNodeGroup", value = try(local.raw.masterNodeGroup, null), fields = ["replicas", "zones", "instanceClass", "additionalTags"] },
      { path = ".masterNodeGroup.instanceClass", value = try(local.raw.masterNodeGroup.instanceClass, null), fields = concat(local.instance_class_fields, ["etcdDisk"]) },
      { path = ".masterNodeGroup.instanceClass.etcdDisk", value = try(local.raw.masterNodeGroup.instanceClass.etcdDisk, null), fields = ["sizeGb", "type"] },
    ],
    try(flatten([
      for i, ng in local.raw.nodeGroups : concat(
        [
          { path = ".nodeGroups[${i}]", value = ng, fields = ["name", "replicas", "zones", "nodeTemplate", "instanceClass", "additionalTags"] },
          { path = ".nodeGroups[${i}].instanceClass", value = try(ng.instanceClass, null), fields = local.instance_class_fields },
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
    error_message = "Deckhouse's AWSClusterConfiguration has no field ${join(", ", local.unknown_fields)}: remove it, or put it where the schema has it (a field the layouts would otherwise drop unseen)."
  }
}
