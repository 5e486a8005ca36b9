# DVP Standard: the static node nodeIndex of nodeGroupName in the parent namespace. Every object comes from
# the provider-free module static-node-manifests (the checks render and dry-run the very same objects);
# the VirtualMachine is applied last and waited for until it runs.

module "render" {
  source                       = "../../../terraform-modules/static-node-manifests"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
}

resource "kubernetes_manifest" "cloud_init_secret" {
  manifest = module.render.cloud_init_secret
}

resource "kubernetes_manifest" "ip_address" {
  manifest = module.render.ip_address
}

resource "kubernetes_manifest" "disks" {
  for_each = module.render.disks
  manifest = each.value
}

resource "kubernetes_manifest" "virtual_machine" {
  manifest = module.render.virtual_machine

  wait {
    fields = {
      "status.phase" = "Running"
    }
  }

  timeouts {
    create = "30m"
    update = "30m"
  }

  depends_on = [
    kubernetes_manifest.cloud_init_secret,
    kubernetes_manifest.ip_address,
    kubernetes_manifest.disks,
  ]
}
