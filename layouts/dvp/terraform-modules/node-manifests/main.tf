# The parent-cluster objects of one node, as plain data (no provider): the cloud-init Secret,
# the IP address, the root disk, the etcd disk (masters), additional disks and the
# VirtualMachine referring to them. The layouts apply them with kubernetes_manifest; the checks
# render them with `tofu apply` and dry-run them against the virtualization CRDs.

variable "name" {
  description = "Name of the VirtualMachine (and the node's hostname); the stem of every other name."
  type        = string
}

variable "namespace" {
  description = "The parent namespace."
  type        = string
}

variable "node_group" {
  description = "The node group (master or a static group), the label dvp.deckhouse.io/node-group."
  type        = string
}

variable "cluster_labels" {
  description = "Labels of every object."
  type        = map(string)
}

variable "vm_labels" {
  description = "Extra labels of the VirtualMachine (cluster labels, additionalVMLabels)."
  type        = map(string)
}

variable "zone" {
  description = "Zone of the parent cluster to pin the VM to; null for none."
  type        = string
  default     = null
}

variable "region" {
  description = "Region of the parent cluster to pin the VM to; null for none."
  type        = string
  default     = null
}

variable "instance_labels" {
  description = "instanceClass.additionalLabels of the group: labels of the VirtualMachine."
  type        = map(string)
  default     = {}
}

variable "ip_address" {
  description = "Static IPv4 address of the VM, or Auto."
  type        = string
  default     = "Auto"
}

variable "cloud_config" {
  description = "Base64 cloud-init user data."
  type        = string
}

variable "virtual_machine" {
  description = "instanceClass.virtualMachine."
  type = object({
    cpu = object({
      cores        = number
      coreFraction = string
    })
    memory = object({
      size = string
    })
    virtualMachineClassName = string
    bootloader              = string
    runPolicy               = string
    liveMigrationPolicy     = string
    additionalLabels        = map(string)
    additionalAnnotations   = map(string)
    nodeSelector            = map(string)
    priorityClassName       = string
    tolerations = list(object({
      key               = string
      operator          = string
      value             = string
      effect            = string
      tolerationSeconds = number
    }))
  })
}

variable "root_disk" {
  description = "instanceClass.rootDisk."
  type = object({
    size         = string
    storageClass = string
    image = object({
      kind = string
      name = string
    })
  })
}

variable "etcd_disk" {
  description = "instanceClass.etcdDisk of a master; null for other nodes."
  type = object({
    size         = string
    storageClass = string
  })
  default = null
}

variable "additional_disks" {
  description = "instanceClass.additionalDisks."
  type = list(object({
    size         = string
    storageClass = string
  }))
}

locals {
  labels = merge(var.cluster_labels, {
    "dvp.deckhouse.io/hostname"   = var.name
    "dvp.deckhouse.io/node-group" = var.node_group
  })
  vm_labels = merge(var.instance_labels, var.virtual_machine.additionalLabels, var.vm_labels, local.labels)

  metadata = {
    for suffix in ["cloud-init", "root", "kubernetes-data"] : suffix => {
      name      = "${var.name}-${suffix}"
      namespace = var.namespace
      labels    = local.labels
    }
  }

  cloud_init_secret = {
    apiVersion = "v1"
    kind       = "Secret"
    metadata   = local.metadata["cloud-init"]
    type       = "provisioning.virtualization.deckhouse.io/cloud-init"
    data = {
      userData = var.cloud_config
    }
  }

  ip_address = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualMachineIPAddress"
    metadata = {
      name      = var.name
      namespace = var.namespace
      labels    = local.labels
    }
    spec = var.ip_address == "Auto" ? { type = "Auto" } : { type = "Static", staticIP = var.ip_address }
  }

  root_disk = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualDisk"
    metadata   = local.metadata["root"]
    spec = {
      persistentVolumeClaim = merge(
        { size = var.root_disk.size },
        var.root_disk.storageClass == null ? {} : { storageClassName = var.root_disk.storageClass },
      )
      dataSource = {
        type = "ObjectRef"
        objectRef = {
          kind = var.root_disk.image.kind
          name = var.root_disk.image.name
        }
      }
    }
  }

  etcd_disk = var.etcd_disk == null ? null : {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualDisk"
    metadata   = local.metadata["kubernetes-data"]
    spec = {
      persistentVolumeClaim = merge(
        { size = var.etcd_disk.size },
        var.etcd_disk.storageClass == null ? {} : { storageClassName = var.etcd_disk.storageClass },
      )
    }
  }

  additional_disks = [
    for i, disk in var.additional_disks : {
      apiVersion = "virtualization.deckhouse.io/v1alpha2"
      kind       = "VirtualDisk"
      metadata = {
        name      = "${var.name}-additional-${i}"
        namespace = var.namespace
        labels    = local.labels
      }
      spec = {
        persistentVolumeClaim = merge(
          { size = disk.size },
          disk.storageClass == null ? {} : { storageClassName = disk.storageClass },
        )
      }
    }
  ]

  disk_names = concat(
    [local.root_disk.metadata.name],
    local.etcd_disk == null ? [] : [local.etcd_disk.metadata.name],
    [for d in local.additional_disks : d.metadata.name],
  )

  node_selector = merge(
    var.zone == null ? {} : { "topology.kubernetes.io/zone" = var.zone },
    var.region == null ? {} : { "topology.kubernetes.io/region" = var.region },
    var.virtual_machine.nodeSelector,
  )

  virtual_machine = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualMachine"
    metadata = {
      name        = var.name
      namespace   = var.namespace
      labels      = local.vm_labels
      annotations = var.virtual_machine.additionalAnnotations
    }
    spec = merge(
      {
        virtualMachineClassName     = var.virtual_machine.virtualMachineClassName
        runPolicy                   = var.virtual_machine.runPolicy
        bootloader                  = var.virtual_machine.bootloader
        liveMigrationPolicy         = var.virtual_machine.liveMigrationPolicy
        osType                      = "Generic"
        enableParavirtualization    = true
        virtualMachineIPAddressName = local.ip_address.metadata.name
        cpu = {
          cores        = var.virtual_machine.cpu.cores
          coreFraction = var.virtual_machine.cpu.coreFraction
        }
        memory = {
          size = var.virtual_machine.memory.size
        }
        blockDeviceRefs = [for name in local.disk_names : { kind = "VirtualDisk", name = name }]
        provisioning = {
          type = "UserDataRef"
          userDataRef = {
            kind = "Secret"
            name = local.cloud_init_secret.metadata.name
          }
        }
        tolerations = [
          for t in var.virtual_machine.tolerations :
          { for k, v in { key = t.key, operator = t.operator, value = t.value, effect = t.effect, tolerationSeconds = t.tolerationSeconds } : k => v if v != null }
        ]
      },
      length(local.node_selector) == 0 ? {} : { nodeSelector = local.node_selector },
      var.virtual_machine.priorityClassName == null ? {} : { priorityClassName = var.virtual_machine.priorityClassName },
    )
  }
}

output "cloud_init_secret" {
  description = "The cloud-init Secret."
  value       = local.cloud_init_secret
}

output "ip_address" {
  description = "The VirtualMachineIPAddress."
  value       = local.ip_address
}

output "root_disk" {
  description = "The root VirtualDisk."
  value       = local.root_disk
}

output "etcd_disk" {
  description = "The etcd VirtualDisk (masters), else null."
  value       = local.etcd_disk
}

output "additional_disks" {
  description = "The additional VirtualDisks."
  value       = local.additional_disks
}

output "virtual_machine" {
  description = "The VirtualMachine."
  value       = local.virtual_machine
}
