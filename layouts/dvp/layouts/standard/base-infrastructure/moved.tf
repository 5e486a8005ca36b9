# Taking over a cluster Deckhouse's DVP layout built: its NetworkPolicy (same name,
# isolated-<prefix>) moves to ours and is updated in place. Deckhouse's validation module holds
# only data sources; nothing of it is in the state to take over.

moved {
  from = kubernetes_manifest.isolated_cluster_prefix_network_policy["isolated_cluster_prefix"]
  to   = kubernetes_manifest.network_policy[0]
}
