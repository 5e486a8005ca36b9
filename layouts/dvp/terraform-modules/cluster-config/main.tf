# Normalises the DVP cluster configuration: names, the parent namespace and the labels every
# object carries (the DVP CCM finds a node's VM by dvp.deckhouse.io/hostname, capdvp and the
# cleanup by dvp.deckhouse.io/cluster-uuid).

# The document typed with Deckhouse's defaults and its values checked; fields.tf refuses the fields
# the typing would drop.
module "typed" {
  source                       = "./typed"
  providerClusterConfiguration = var.providerClusterConfiguration
}

locals {
  pcc    = module.typed.providerClusterConfiguration
  prefix = var.clusterConfiguration.cloud.prefix

  # Labels on every object the layouts create in the parent namespace.
  cluster_labels = {
    "dvp.deckhouse.io/cluster-uuid" = var.clusterUUID
    "deckhouse.io/managed-by"       = "deckhouse"
  }

  # dhctl runs master-node replicas times (static-node replicas times per group): an index
  # beyond that is a mistake.
  group_replicas      = var.nodeGroupName == "" ? local.pcc.masterNodeGroup.replicas : try([for ng in local.pcc.nodeGroups : ng.replicas if ng.name == var.nodeGroupName][0], 0)
  node_index_in_range = var.nodeIndex < local.group_replicas
}

# The parent cluster's connection from the kubeconfig: its current context, else the first.
locals {
  kubeconfig   = yamldecode(base64decode(local.pcc.provider.kubeconfigDataBase64))
  context_name = try(local.kubeconfig["current-context"], "")
  contexts     = try(local.kubeconfig.contexts, [])
  context = try(
    [for c in local.contexts : c.context if c.name == local.context_name][0],
    local.contexts[0].context,
    { cluster = local.kubeconfig.clusters[0].name, user = try(local.kubeconfig.users[0].name, "") },
  )
  kube_cluster = [for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster][0]
  kube_user    = try([for u in local.kubeconfig.users : u.user if u.name == local.context.user][0], {})

  parent_connection = {
    host                   = local.kube_cluster.server
    cluster_ca_certificate = try(base64decode(local.kube_cluster["certificate-authority-data"]), null)
    insecure               = try(local.kube_cluster["insecure-skip-tls-verify"], false)
    token                  = try(local.kube_user.token, null)
    client_certificate     = try(base64decode(local.kube_user["client-certificate-data"]), null)
    client_key             = try(base64decode(local.kube_user["client-key-data"]), null)
  }
}
