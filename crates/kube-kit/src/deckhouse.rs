//! What a Deckhouse cluster keeps about itself that Stratus's binaries read when Deckhouse's
//! templates do not pass it: the cluster's UUID, in the ConfigMap `kube-system/d8-cluster-uuid`
//! (key `cluster-uuid`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

/// Where Deckhouse keeps the cluster's UUID: namespace, ConfigMap, key.
pub const CLUSTER_UUID_CONFIGMAP: (&str, &str, &str) =
    ("kube-system", "d8-cluster-uuid", "cluster-uuid");

/// The cluster's UUID as Deckhouse keeps it; `Ok(None)` when the ConfigMap or its key is absent.
pub async fn cluster_uuid(kube: &kube::Client) -> Result<Option<String>, String> {
    let (namespace, name, key) = CLUSTER_UUID_CONFIGMAP;
    let cm = Api::<ConfigMap>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading configmap {namespace}/{name}: {e}"))?;
    Ok(cm
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(key))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty()))
}

/// Whether a `--cluster-uuid`/`CLUSTER_UUID` value can be a cluster's identity (Deckhouse's DVP
/// template passes the CSI socket's URL there on nodes).
pub fn usable_cluster_uuid(value: &str) -> bool {
    let v = value.trim();
    !v.is_empty() && !v.contains("://") && !v.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_values() {
        assert!(usable_cluster_uuid("0f4c5a4e-7c1e-4a41-9a62-2a1f6a0a1b2c"));
        assert!(usable_cluster_uuid("c1"));
        assert!(!usable_cluster_uuid(""));
        assert!(!usable_cluster_uuid("unix:///csi/csi.sock"));
        assert!(!usable_cluster_uuid("/csi/csi.sock"));
    }
}
