# The DVPClusterConfiguration typed as the layouts read it, with Deckhouse's defaults and the checks
# of its values. cluster-config passes the document here once it has refused unknown fields (a
# typed variable drops them without a word).

variable "providerClusterConfiguration" {
  description = "The DVPClusterConfiguration document (deckhouse.io/v1) typed: the parent cluster connection, the master and node groups; dhctl's own fields (apiVersion, kind, nodeGroups[].nodeTemplate) pass cluster-config's field check and are left to dhctl."
  type = object({
    layout       = string
    sshPublicKey = string
    region       = optional(string)
    zones        = optional(list(string), [])
    provider = object({
      kubeconfigDataBase64 = string
      namespace            = string
      networkPolicy        = optional(string, "Isolated")
      ingressPorts         = optional(list(number), [22])
      additionalVMLabels   = optional(map(string), {})
    })
    masterNodeGroup = object({
      replicas = number
      zones    = optional(list(string), [])
      instanceClass = object({
        virtualMachine = object({
          cpu = object({
            cores        = number
            coreFraction = optional(string, "100%")
          })
          memory = object({
            size = string
          })
          virtualMachineClassName = string
          bootloader              = optional(string, "EFI")
          runPolicy               = optional(string, "AlwaysOnUnlessStoppedManually")
          liveMigrationPolicy     = optional(string, "PreferForced")
          ipAddresses             = optional(list(string), [])
          additionalLabels        = optional(map(string), {})
          additionalAnnotations   = optional(map(string), {})
          nodeSelector            = optional(map(string), {})
          priorityClassName       = optional(string)
          tolerations = optional(list(object({
            key               = optional(string)
            operator          = optional(string)
            value             = optional(string)
            effect            = optional(string)
            tolerationSeconds = optional(number)
          })), [])
        })
        rootDisk = object({
          size         = string
          storageClass = optional(string)
          image = object({
            kind = string
            name = string
          })
        })
        etcdDisk = object({
          size         = string
          storageClass = optional(string)
        })
        additionalDisks = optional(list(object({
          size         = string
          storageClass = optional(string)
        })), [])
        additionalLabels = optional(map(string), {})
      })
    })
    nodeGroups = optional(list(object({
      name     = string
      replicas = number
      zones    = optional(list(string), [])
      instanceClass = object({
        virtualMachine = object({
          cpu = object({
            cores        = number
            coreFraction = optional(string, "100%")
          })
          memory = object({
            size = string
          })
          virtualMachineClassName = string
          bootloader              = optional(string, "EFI")
          runPolicy               = optional(string, "AlwaysOnUnlessStoppedManually")
          liveMigrationPolicy     = optional(string, "PreferForced")
          ipAddresses             = optional(list(string), [])
          additionalLabels        = optional(map(string), {})
          additionalAnnotations   = optional(map(string), {})
          nodeSelector            = optional(map(string), {})
          priorityClassName       = optional(string)
          tolerations = optional(list(object({
            key               = optional(string)
            operator          = optional(string)
            value             = optional(string)
            effect            = optional(string)
            tolerationSeconds = optional(number)
          })), [])
        })
        rootDisk = object({
          size         = string
          storageClass = optional(string)
          image = object({
            kind = string
            name = string
          })
        })
        additionalDisks = optional(list(object({
          size         = string
          storageClass = optional(string)
        })), [])
      })
    })), [])
  })

  validation {
    condition     = var.providerClusterConfiguration.layout == "Standard"
    error_message = "providerClusterConfiguration.layout must be Standard (the only DVP layout)."
  }
  validation {
    condition     = can(regex("^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+", var.providerClusterConfiguration.sshPublicKey))
    error_message = "providerClusterConfiguration.sshPublicKey must be an OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-*)."
  }
  validation {
    condition     = can(yamldecode(base64decode(var.providerClusterConfiguration.provider.kubeconfigDataBase64)).clusters[0].cluster.server) && can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.providerClusterConfiguration.provider.namespace))
    error_message = "providerClusterConfiguration.provider: kubeconfigDataBase64 must be a base64-encoded kubeconfig of the parent cluster (with at least one cluster) and namespace a namespace name."
  }
  validation {
    condition     = contains(["Isolated", "None"], var.providerClusterConfiguration.provider.networkPolicy) && alltrue([for p in var.providerClusterConfiguration.provider.ingressPorts : p >= 1 && p <= 65535])
    error_message = "providerClusterConfiguration.provider: networkPolicy must be Isolated or None and ingressPorts ports between 1 and 65535."
  }
  validation {
    condition     = var.providerClusterConfiguration.masterNodeGroup.replicas >= 1 && floor(var.providerClusterConfiguration.masterNodeGroup.replicas) == var.providerClusterConfiguration.masterNodeGroup.replicas
    error_message = "providerClusterConfiguration.masterNodeGroup.replicas must be a whole number of at least 1."
  }
  validation {
    condition = alltrue([
      for vm in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.virtualMachine]) :
      vm.cpu.cores >= 1 && floor(vm.cpu.cores) == vm.cpu.cores
    ])
    error_message = "instanceClass.virtualMachine.cpu.cores must be a whole number of at least 1 (masterNodeGroup and every nodeGroup)."
  }
  validation {
    condition = alltrue([
      for vm in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.virtualMachine]) :
      can(regex("^([1-9][0-9]?|100)%$", vm.cpu.coreFraction))
    ])
    error_message = "instanceClass.virtualMachine.cpu.coreFraction must be a percentage from 1% to 100%, such as 25%."
  }
  validation {
    condition = alltrue([
      for vm in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.virtualMachine]) :
      can(regex("^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$", vm.memory.size)) && vm.virtualMachineClassName != ""
    ])
    error_message = "instanceClass.virtualMachine: memory.size must be a quantity such as 8Gi and virtualMachineClassName must be set."
  }
  validation {
    condition = alltrue([
      for vm in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.virtualMachine]) :
      contains(["BIOS", "EFI", "EFIWithSecureBoot"], vm.bootloader) && contains(["AlwaysOn", "AlwaysOff", "Manual", "AlwaysOnUnlessStoppedManually"], vm.runPolicy) && contains(["Manual", "Never", "AlwaysSafe", "PreferSafe", "AlwaysForced", "PreferForced"], vm.liveMigrationPolicy)
    ])
    error_message = "instanceClass.virtualMachine: bootloader must be BIOS, EFI or EFIWithSecureBoot; runPolicy AlwaysOn, AlwaysOff, Manual or AlwaysOnUnlessStoppedManually; liveMigrationPolicy Manual, Never, AlwaysSafe, PreferSafe, AlwaysForced or PreferForced."
  }
  validation {
    condition = alltrue([
      for disk in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.rootDisk], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.rootDisk]) :
      contains(["ClusterVirtualImage", "VirtualImage", "VirtualDisk"], disk.image.kind) && disk.image.name != "" && can(regex("^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$", disk.size))
    ])
    error_message = "instanceClass.rootDisk: image.kind must be ClusterVirtualImage, VirtualImage or VirtualDisk, image.name must be set and size must be a quantity such as 30Gi."
  }
  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$", var.providerClusterConfiguration.masterNodeGroup.instanceClass.etcdDisk.size)) && try(var.providerClusterConfiguration.masterNodeGroup.instanceClass.etcdDisk.storageClass, "x") != ""
    error_message = "masterNodeGroup.instanceClass.etcdDisk needs a size such as 10Gi; its storageClass, when set, must not be empty (left out, the parent's default StorageClass is used)."
  }
  validation {
    condition     = alltrue([for ip in var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine.ipAddresses : ip == "Auto" || can(cidrnetmask("${ip}/32"))])
    error_message = "masterNodeGroup.instanceClass.virtualMachine.ipAddresses must hold IPv4 addresses or Auto."
  }
  validation {
    condition     = alltrue(flatten([for ng in var.providerClusterConfiguration.nodeGroups : [for ip in ng.instanceClass.virtualMachine.ipAddresses : ip == "Auto" || can(cidrnetmask("${ip}/32"))]]))
    error_message = "nodeGroups[].instanceClass.virtualMachine.ipAddresses must hold IPv4 addresses or Auto."
  }
  validation {
    condition = alltrue(flatten([
      for vm in concat([var.providerClusterConfiguration.masterNodeGroup.instanceClass.virtualMachine], [for ng in var.providerClusterConfiguration.nodeGroups : ng.instanceClass.virtualMachine]) : [
        for t in vm.tolerations :
        contains(["Exists", "Equal"], coalesce(t.operator, "Equal")) && contains(["", "NoSchedule", "PreferNoSchedule", "NoExecute"], coalesce(t.effect, "")) && (t.tolerationSeconds == null || (coalesce(t.effect, "") == "NoExecute" && try(floor(t.tolerationSeconds) == t.tolerationSeconds, false)))
      ]
    ]))
    error_message = "instanceClass.virtualMachine.tolerations: operator must be Exists or Equal, effect NoSchedule, PreferNoSchedule or NoExecute, and tolerationSeconds a whole number given only with effect NoExecute."
  }
  validation {
    condition     = try(var.providerClusterConfiguration.region, "x") != ""
    error_message = "providerClusterConfiguration.region, when set, must not be empty (it pins the VMs to topology.kubernetes.io/region of the parent)."
  }
  validation {
    condition     = alltrue([for ng in var.providerClusterConfiguration.nodeGroups : can(regex("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$", ng.name)) && ng.replicas >= 0]) && length(distinct([for ng in var.providerClusterConfiguration.nodeGroups : ng.name])) == length(var.providerClusterConfiguration.nodeGroups)
    error_message = "providerClusterConfiguration.nodeGroups: names must be unique DNS labels (at most 42 characters) and replicas must not be negative."
  }
}
