# The parent-cluster objects of one node, as plain data (no provider): the cloud-init Secret,
# the IP address, the root disk, the etcd disk (masters), additional disks and the
# VirtualMachine referring to them. The layouts apply them with kubernetes_manifest (the Secret
# with kubernetes_secret); the checks render them with `tofu apply` and dry-run them against the
# virtualization CRDs.

variable "name" {
  description = "The node's hostname, <prefix>-<group>-<index>: the stem of every object's name."
  type        = string
}

variable "prefix" {
  description = "clusterConfiguration.cloud.prefix (the etcd and additional disks' names spell it out)."
  type        = string
}

variable "node_index" {
  description = "Index of the node within its group (the etcd and additional disks' names spell it out)."
  type        = number
}

variable "ssh_public_key" {
  description = "The cluster's SSH public key: its hash is part of the VM's name."
  type        = string
}

variable "tolerations_given" {
  description = "Whether the configuration names the VM's tolerations (an empty list included): Deckhouse hashes none as null and renders no tolerations then."
  type        = bool
  default     = true
}

variable "allocated_ip_address" {
  description = "The address the parent cluster allocated to the node's VirtualMachineIPAddress (its status.address): part of the VM's name. Null while it is not known."
  type        = string
  default     = null
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

# Object names follow Deckhouse's DVP layout, so that a node Deckhouse built is taken over under
# the same names (kubernetes_manifest replaces an object whose name changes): each ends in the
# first six hex digits of a SHA-256 over the JSON of the parameters whose change replaces the
# object. A disk hashes its parameters' JSON text encoded once more as a JSON string, the VM the
# JSON itself; jsonencode sorts object keys, as Deckhouse's HCL does.
locals {
  labels = merge(var.cluster_labels, {
    "dvp.deckhouse.io/hostname"   = var.name
    "dvp.deckhouse.io/node-group" = var.node_group
  })
  vm_labels = merge(var.instance_labels, var.virtual_machine.additionalLabels, var.vm_labels, local.labels, {
    "dvp.deckhouse.io/cluster-prefix" = var.prefix
  })

  # The disks: what replaces each (the root disk's image; nothing for the others, spelled as
  # Deckhouse spells it), the hash, and the annotations recording both.
  disk_parameters = {
    root = jsonencode({
      rootDisk = { image = { type = var.root_disk.image.kind, name = var.root_disk.image.name } }
    })
    "kubernetes-data" = jsonencode({ kbernetesDataDisk = {} })
    additional        = jsonencode({ additionalDisk = {} })
  }
  disk_hash = { for role, json in local.disk_parameters : role => substr(sha256(jsonencode(json)), 0, 6) }
  disk_annotations = {
    for role in keys(local.disk_parameters) : role => {
      "last_applied_destructive_${role == "additional" ? "additional" : "root"}_disk_parameters"      = local.disk_parameters[role]
      "last_applied_destructive_${role == "additional" ? "additional" : "root"}_disk_parameters_hash" = local.disk_hash[role]
    }
  }

  root_disk_name = "${var.name}-${local.disk_hash.root}"
  etcd_disk_name = "${var.prefix}-${var.node_group}-kubernetes-data-${var.node_index}-${local.disk_hash["kubernetes-data"]}"
  # Additional disks in the order of their indexes as text (Deckhouse sorts its module keys).
  additional_order = [for k in sort([for i in range(length(var.additional_disks)) : tostring(i)]) : tonumber(k)]

  node_selector = merge(
    var.zone == null ? {} : { "topology.kubernetes.io/zone" = var.zone },
    var.region == null ? {} : { "topology.kubernetes.io/region" = var.region },
    var.virtual_machine.nodeSelector,
  )
  # Tolerations as Deckhouse holds them: maps of strings, only the fields given.
  tolerations = !var.tolerations_given || var.virtual_machine.tolerations == null ? null : [
    for t in var.virtual_machine.tolerations :
    { for k, v in { key = t.key, operator = t.operator, value = t.value, effect = t.effect, tolerationSeconds = t.tolerationSeconds } : k => v if v != null }
  ]

  # What replaces the VM: its size and placement, the allocated address, the SSH key and the
  # disks' hashes.
  vm_parameters = jsonencode(merge(
    {
      virtualMachine = {
        cpu = {
          cores        = var.virtual_machine.cpu.cores
          coreFraction = var.virtual_machine.cpu.coreFraction
        }
        memory            = { size = var.virtual_machine.memory.size }
        nodeSelector      = local.node_selector
        tolerations       = local.tolerations == null ? null : [for t in local.tolerations : { for k, v in t : k => tostring(v) }]
        priorityClassName = var.virtual_machine.priorityClassName
        ipAddress         = var.allocated_ip_address
        sshPublicKeyHash  = sha256(jsonencode(var.ssh_public_key))
      }
      rootDiskHash        = local.disk_hash.root
      additionalDisksHash = [for i in local.additional_order : local.disk_hash.additional]
    },
    var.etcd_disk == null ? {} : { etcDiskHash = local.disk_hash["kubernetes-data"] },
  ))
  vm_hash = substr(sha256(local.vm_parameters), 0, 6)
  vm_name = "${var.name}-${local.vm_hash}"

  # The guest would take the VM's name (with its hash) as hostname: cloud-init sets the node's.
  # dhctl's user data is a cloud-config document; keys added at its end override its own. Other
  # user data is left as it is.
  user_data = var.cloud_config == "" ? "#cloud-config\n" : base64decode(var.cloud_config)
  user_data_with_hostname = (
    startswith(local.user_data, "#cloud-config")
    ? format("%s\n%s", trimsuffix(local.user_data, "\n"), "hostname: ${var.name}\nprefer_fqdn_over_hostname: false\n")
    : local.user_data
  )

  cloud_init_secret = {
    apiVersion = "v1"
    kind       = "Secret"
    metadata = {
      name      = "${var.name}-cloudinit-${local.vm_hash}"
      namespace = var.namespace
      labels    = local.labels
    }
    type = "provisioning.virtualization.deckhouse.io/cloud-init"
    data = {
      userData = base64encode(local.user_data_with_hostname)
    }
  }

  ip_address = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualMachineIPAddress"
    metadata = {
      name      = lower("${var.name}-${replace(var.ip_address, ".", "-")}")
      namespace = var.namespace
      labels    = local.labels
    }
    spec = var.ip_address == "Auto" ? { type = "Auto", staticIP = "" } : { type = "Static", staticIP = var.ip_address }
  }

  root_disk = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualDisk"
    metadata = {
      name        = local.root_disk_name
      namespace   = var.namespace
      labels      = local.labels
      annotations = local.disk_annotations.root
    }
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
    metadata = {
      name        = local.etcd_disk_name
      namespace   = var.namespace
      labels      = local.labels
      annotations = local.disk_annotations["kubernetes-data"]
    }
    spec = {
      persistentVolumeClaim = merge(
        { size = var.etcd_disk.size },
        var.etcd_disk.storageClass == null ? {} : { storageClassName = var.etcd_disk.storageClass },
      )
    }
  }

  additional_disks = [
    for i in local.additional_order : {
      apiVersion = "virtualization.deckhouse.io/v1alpha2"
      kind       = "VirtualDisk"
      metadata = {
        name        = "${var.prefix}-${var.node_group}-additional-disk-${i}-${var.node_index}-${local.disk_hash.additional}"
        namespace   = var.namespace
        labels      = local.labels
        annotations = local.disk_annotations.additional
      }
      spec = {
        persistentVolumeClaim = merge(
          { size = var.additional_disks[i].size },
          var.additional_disks[i].storageClass == null ? {} : { storageClassName = var.additional_disks[i].storageClass },
        )
      }
    }
  ]

  disk_names = concat(
    [local.root_disk.metadata.name],
    local.etcd_disk == null ? [] : [local.etcd_disk.metadata.name],
    [for d in local.additional_disks : d.metadata.name],
  )

  # The spec Deckhouse renders: a field it sets differently would change the running VM (and
  # with Automatic restart approval the platform restarts it).
  virtual_machine = {
    apiVersion = "virtualization.deckhouse.io/v1alpha2"
    kind       = "VirtualMachine"
    metadata = {
      name      = local.vm_name
      namespace = var.namespace
      labels    = local.vm_labels
      annotations = merge(
        {
          last_applied_destructive_vm_parameters      = local.vm_parameters
          last_applied_destructive_vm_parameters_hash = local.vm_hash
        },
        var.virtual_machine.additionalAnnotations,
      )
    }
    spec = merge(
      {
        terminationGracePeriodSeconds = 90
        virtualMachineClassName       = var.virtual_machine.virtualMachineClassName
        runPolicy                     = var.virtual_machine.runPolicy
        bootloader                    = var.virtual_machine.bootloader
        liveMigrationPolicy           = var.virtual_machine.liveMigrationPolicy
        osType                        = "Generic"
        enableParavirtualization      = true
        disruptions                   = { restartApprovalMode = "Automatic" }
        virtualMachineIPAddressName   = local.ip_address.metadata.name
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
      },
      local.tolerations == null ? {} : { tolerations = local.tolerations },
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
