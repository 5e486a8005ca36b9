# Deckhouse's DVPClusterConfiguration schema fixes the fields of its objects (additionalProperties:
# false); a typed OpenTofu variable would drop an unknown one without a word (a misspelt
# storageClass, additionalLabels put on a node group's instance class). Every object of the
# document is listed here with the fields it may have; any other field fails the plan, named by its
# path. Maps of free keys (labels, annotations, nodeSelector, additionalVMLabels) are not checked.

locals {
  raw = var.providerClusterConfiguration

  # The instance classes: the master's has an etcd disk and labels of its own.
  instance_classes = concat(
    [{ path = ".masterNodeGroup.instanceClass", value = try(local.raw.masterNodeGroup.instanceClass, null), fields = ["virtualMachine", "rootDisk", "etcdDisk", "additionalDisks", "additionalLabels"] }],
    try([for i, ng in local.raw.nodeGroups : { path = ".nodeGroups[${i}].instanceClass", value = try(ng.instanceClass, null), fields = ["virtualMachine", "rootDisk", "additionalDisks"] }], []),
  )

  checked_objects = concat(
    [
      { path = "", value = local.raw, fields = ["apiVersion", "kind", "layout", "sshPublicKey", "region", "zones", "provider", "masterNodeGroup", "nodeGroups"] },
      { path = ".provider", value = try(local.raw.provider, null), fields = ["kubeconfigDataBase64", "namespace", "networkPolicy", "ingressPorts", "additionalVMLabels"] },
      { path = ".masterNodeGroup", value = try(local.raw.masterNodeGroup, null), fields = ["replicas", "zones", "instanceClass"] },
      { path = ".masterNodeGroup.instanceClass.etcdDisk", value = try(local.raw.masterNodeGroup.instanceClass.etcdDisk, null), fields = ["size", "storageClass"] },
    ],
    try(flatten([
      for i, ng in local.raw.nodeGroups : concat(
        [
          { path = ".nodeGroups[${i}]", value = ng, fields = ["name", "replicas", "zones", "nodeTemplate", "instanceClass"] },
          { path = ".nodeGroups[${i}].nodeTemplate", value = try(ng.nodeTemplate, null), fields = ["labels", "annotations", "taints"] },
        ],
        try([for j, t in ng.nodeTemplate.taints : { path = ".nodeGroups[${i}].nodeTemplate.taints[${j}]", value = t, fields = ["effect", "key", "value"] }], []),
      )
    ]), []),
    flatten([
      for ic in local.instance_classes : concat(
        [
          ic,
          {
            path  = "${ic.path}.virtualMachine"
            value = try(ic.value.virtualMachine, null)
            fields = [
              "cpu", "memory", "virtualMachineClassName", "bootloader", "runPolicy", "liveMigrationPolicy", "ipAddresses",
              "additionalLabels", "additionalAnnotations", "nodeSelector", "priorityClassName", "tolerations",
            ]
          },
          { path = "${ic.path}.virtualMachine.cpu", value = try(ic.value.virtualMachine.cpu, null), fields = ["cores", "coreFraction"] },
          { path = "${ic.path}.virtualMachine.memory", value = try(ic.value.virtualMachine.memory, null), fields = ["size"] },
          { path = "${ic.path}.rootDisk", value = try(ic.value.rootDisk, null), fields = ["size", "storageClass", "image"] },
          { path = "${ic.path}.rootDisk.image", value = try(ic.value.rootDisk.image, null), fields = ["kind", "name"] },
        ],
        try([for j, t in ic.value.virtualMachine.tolerations : { path = "${ic.path}.virtualMachine.tolerations[${j}]", value = t, fields = ["key", "operator", "value", "effect", "tolerationSeconds"] }], []),
        try([for j, d in ic.value.additionalDisks : { path = "${ic.path}.additionalDisks[${j}]", value = d, fields = ["size", "storageClass"] }], []),
      )
    ]),
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
    error_message = "Deckhouse's DVPClusterConfiguration has no field ${join(", ", local.unknown_fields)}: remove it, or put it where the schema has it (a field the layouts would otherwise drop unseen)."
  }
}
