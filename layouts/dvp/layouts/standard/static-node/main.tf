# DVP Standard: the static node nodeIndex of nodeGroupName in the parent namespace. Every object comes from
# the provider-free module static-node-manifests (the checks render and dry-run the very same objects);
# the VirtualMachine is applied last and waited for until it runs. Every name is Deckhouse's
# (node-manifests), so a node Deckhouse built is taken over in place (takeover.tf); the VM's
# name hashes the address the parent allocated to the node's VirtualMachineIPAddress, read back
# below.

module "render" {
  source                       = "../../../terraform-modules/static-node-manifests"
  clusterConfiguration         = var.clusterConfiguration
  providerClusterConfiguration = var.providerClusterConfiguration
  clusterUUID                  = var.clusterUUID
  nodeIndex                    = var.nodeIndex
  cloudConfig                  = var.cloudConfig
  nodeGroupName                = var.nodeGroupName
  allocated_ip_address         = local.allocated_ip_address
}

# The address the parent allocated, read before anything is applied: a node that exists (a
# converge, a takeover) keeps its VM's name whatever else the plan changes. A new node's address
# is known from its configuration (Static) or once its VirtualMachineIPAddress is bound (read
# again after it is applied).
data "kubernetes_resource" "ip_address" {
  api_version = module.render.ip_address.apiVersion
  kind        = module.render.ip_address.kind
  metadata {
    name      = module.render.ip_address.metadata.name
    namespace = module.render.ip_address.metadata.namespace
  }
}

data "kubernetes_resource" "ip_address_bound" {
  api_version = module.render.ip_address.apiVersion
  kind        = module.render.ip_address.kind
  metadata {
    name      = module.render.ip_address.metadata.name
    namespace = module.render.ip_address.metadata.namespace
  }
  depends_on = [kubernetes_manifest.ip_address]
}

locals {
  existing_ip_address = try(data.kubernetes_resource.ip_address.object.status.address, null)
  allocated_ip_address = (
    local.existing_ip_address != null ? local.existing_ip_address
    : module.render.ip_address.spec.staticIP != "" ? module.render.ip_address.spec.staticIP
    : try(data.kubernetes_resource.ip_address_bound.object.status.address, null)
  )
}

# A kubernetes_secret as in Deckhouse's layout (so its Secret moves here); cloud-init reads it at
# the first boot only, so a later change of the user data is not applied (nor is it in Deckhouse's).
resource "kubernetes_secret" "cloud_init" {
  metadata {
    name      = module.render.cloud_init_secret.metadata.name
    namespace = module.render.cloud_init_secret.metadata.namespace
    labels    = module.render.cloud_init_secret.metadata.labels
  }
  type = module.render.cloud_init_secret.type
  data = {
    userData = base64decode(module.render.cloud_init_secret.data.userData)
  }

  lifecycle {
    ignore_changes = [data]
  }
}

resource "kubernetes_manifest" "ip_address" {
  manifest = module.render.ip_address

  wait {
    fields = {
      "status.phase" = "Bound"
    }
  }
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
    kubernetes_secret.cloud_init,
    kubernetes_manifest.ip_address,
    kubernetes_manifest.disks,
  ]
}
