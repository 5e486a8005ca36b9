# The base infrastructure of the DVP Standard layout, rendered without a provider: with
# networkPolicy Isolated, a NetworkPolicy that lets the cluster's VMs talk to each other and
# opens only ingressPorts to everyone else. Nothing else is shared between nodes.

locals {
  policy = module.config.network_policy
  cluster_selector = {
    matchLabels = module.config.cluster_labels
  }

  network_policy = {
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata = {
      name      = "isolated-${module.config.prefix}"
      namespace = module.config.namespace
      labels    = module.config.cluster_labels
    }
    spec = {
      podSelector = local.cluster_selector
      policyTypes = ["Ingress"]
      ingress = [
        { from = [{ podSelector = local.cluster_selector }] },
        { ports = [for p in local.policy.ingress_ports : { protocol = "TCP", port = p }] },
      ]
    }
  }
}

output "network_policy" {
  description = "The NetworkPolicy isolating the cluster's VMs, null with networkPolicy None."
  value       = local.policy.isolated ? local.network_policy : null
}

output "cloud_discovery_data" {
  description = "Discovery data dhctl stores for the cloud-data-discoverer (DVPCloudDiscoveryData)."
  value = {
    apiVersion = "deckhouse.io/v1"
    kind       = "DVPCloudDiscoveryData"
    zones      = length(module.config.zones) > 0 ? module.config.zones : ["default"]
  }
}
