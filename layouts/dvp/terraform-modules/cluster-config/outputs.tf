output "prefix" {
  description = "Prefix of every object name (clusterConfiguration.cloud.prefix)."
  value       = local.prefix
}

output "layout" {
  description = "The layout name."
  value       = local.pcc.layout
}

output "namespace" {
  description = "The parent cluster's namespace every object goes to."
  value       = local.pcc.provider.namespace
}

output "parent_connection" {
  description = "How the kubernetes provider reaches the parent cluster: server, CA and credentials of the kubeconfig's current context."
  value       = local.parent_connection
  sensitive   = true
}

output "cluster_labels" {
  description = "Labels of every object: the cluster UUID and the manager."
  value       = local.cluster_labels
}

output "vm_labels" {
  description = "Labels of every VirtualMachine besides the per-node ones: the cluster labels and provider.additionalVMLabels."
  value       = merge(local.pcc.provider.additionalVMLabels, local.cluster_labels)
}

output "ssh_public_key" {
  description = "The public key given to every node through cloud-init."
  value       = local.pcc.sshPublicKey
}

output "region" {
  description = "Region of the parent cluster the VMs are pinned to (null: none)."
  value       = local.pcc.region
}

output "zones" {
  description = "Zones of the parent cluster the nodes may use (empty: no zone pinning)."
  value       = local.pcc.zones
}

output "network_policy" {
  description = "Whether the cluster's VMs are isolated (Isolated) and which ports stay open to the outside."
  value = {
    isolated      = local.pcc.provider.networkPolicy == "Isolated"
    ingress_ports = local.pcc.provider.ingressPorts
  }
}

output "master" {
  description = "The master node group."
  value       = local.pcc.masterNodeGroup
}

output "node_groups" {
  description = "The static node groups by name."
  value       = { for ng in local.pcc.nodeGroups : ng.name => ng }
}

output "node_index_in_range" {
  description = "Whether nodeIndex is below the replicas of its group (masterNodeGroup, or nodeGroups[nodeGroupName])."
  value       = local.node_index_in_range
}
