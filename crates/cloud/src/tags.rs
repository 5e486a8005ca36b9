//! Tag keys that mark cloud resources as the cluster's, shared by every cloud that tags.

/// Prefix of the cluster ownership tag: `kubernetes.io/cluster/<cluster-id>`.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// The ownership tag key of `cluster_id`.
pub fn cluster_tag_key(cluster_id: &str) -> String {
    format!("{CLUSTER_TAG_PREFIX}{cluster_id}")
}

/// Tag naming the Service a load balancer was made for (`namespace/name`).
pub const SERVICE_NAME_TAG: &str = "kubernetes.io/service-name";
