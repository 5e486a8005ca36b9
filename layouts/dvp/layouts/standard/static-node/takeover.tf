# Taking over a node Deckhouse's DVP layout built. Its objects move to our addresses; what only
# Deckhouse's build of the Kubernetes provider knows (readiness checks, ownerReferences patches)
# is forgotten, never destroyed: forgetting changes nothing in the parent cluster (the
# ownerReferences stay on the objects). Reading such a state needs a provider that has
# Deckhouse's types (docs/src/layouts.md, "Taking over a cluster Deckhouse built (DVP)").

moved {
  from = module.root-disk.kubernetes_manifest.root-disk
  to   = kubernetes_manifest.disks["root"]
}

moved {
  from = module.ipv4-address.kubernetes_manifest.ipv4_address[0]
  to   = kubernetes_manifest.ip_address
}

moved {
  from = module.static-node.kubernetes_manifest.vm
  to   = kubernetes_manifest.virtual_machine
}

moved {
  from = module.additional-disk["0"].kubernetes_manifest.additional_disk
  to   = kubernetes_manifest.disks["additional-0"]
}

moved {
  from = module.additional-disk["1"].kubernetes_manifest.additional_disk
  to   = kubernetes_manifest.disks["additional-1"]
}

moved {
  from = module.additional-disk["2"].kubernetes_manifest.additional_disk
  to   = kubernetes_manifest.disks["additional-2"]
}

moved {
  from = module.additional-disk["3"].kubernetes_manifest.additional_disk
  to   = kubernetes_manifest.disks["additional-3"]
}

moved {
  from = module.static-node.kubernetes_secret.cloudinit-secret
  to   = kubernetes_secret.cloud_init
}

removed {
  from = module.root-disk.kubernetes_resource_ready_v1.root-disk
  lifecycle {
    destroy = false
  }
}

removed {
  from = module.root-disk.kubernetes_resource_ready_v1.root-disk-migration
  lifecycle {
    destroy = false
  }
}

removed {
  from = module.ipv4-address.kubernetes_resource_ready_v1.ipv4_address
  lifecycle {
    destroy = false
  }
}

removed {
  from = module.additional-disk.kubernetes_resource_ready_v1.additional_disk
  lifecycle {
    destroy = false
  }
}

removed {
  from = module.additional-disk.kubernetes_resource_ready_v1.additional_disk_migration
  lifecycle {
    destroy = false
  }
}

removed {
  from = kubernetes_owner_references_v1.root-disk
  lifecycle {
    destroy = false
  }
}

removed {
  from = kubernetes_owner_references_v1.ipv4-address
  lifecycle {
    destroy = false
  }
}

removed {
  from = kubernetes_owner_references_v1.additional-disk
  lifecycle {
    destroy = false
  }
}

removed {
  from = kubernetes_owner_references_v1.cloudinit-secret
  lifecycle {
    destroy = false
  }
}
