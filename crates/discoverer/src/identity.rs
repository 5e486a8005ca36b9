//! The cluster's identity when nothing names it (Deckhouse's templates pass the discoverer no
//! `--cluster-id` on AWS and no `CLUSTER_UUID` on DVP), found in what the cluster already holds:
//! on AWS the ownership tag `kubernetes.io/cluster/<id>` its nodes' instances carry (the Nodes'
//! provider IDs name the instances; one DescribeInstances), on DVP the ConfigMap
//! `kube-system/d8-cluster-uuid` (key `cluster-uuid`) in which Deckhouse keeps the cluster's UUID.
//! Either way, a cluster whose identity cannot be found reports no orphaned disk (never another
//! cluster's).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use stratus_aws_api::ec2::filter;
use stratus_aws_api::Ec2;

use crate::aws::CLUSTER_TAG_PREFIX;

/// A cluster identity given at start, or looked for on each pass until found (then kept).
#[derive(Debug, Default)]
pub struct ClusterIdentity {
    known: std::sync::Mutex<Option<String>>,
    reported: std::sync::atomic::AtomicBool,
}

impl ClusterIdentity {
    /// Starts with `given` (none: looked for).
    pub fn new(given: Option<String>) -> Self {
        ClusterIdentity {
            known: std::sync::Mutex::new(given),
            reported: Default::default(),
        }
    }

    /// The identity: the one known, else what `find` finds now (`what` and `from` name it in
    /// the log: found once at info, not found once at warning).
    pub async fn get_or_find<F, Fut>(&self, what: &str, from: &str, find: F) -> Option<String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<String>, String>>,
    {
        if let Some(known) = self.lock().clone() {
            return Some(known);
        }
        use std::sync::atomic::Ordering;
        match find().await {
            Ok(Some(found)) => {
                tracing::info!(what, from, value = %found, "cluster identity found");
                *self.lock() = Some(found.clone());
                Some(found)
            }
            Ok(None) => {
                if !self.reported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        what,
                        from,
                        "cluster identity not found: orphaned disks are not looked for until it is"
                    );
                }
                None
            }
            Err(e) => {
                if !self.reported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(what, from, error = %e, "cannot look for the cluster identity: orphaned disks are not looked for until it is found");
                }
                None
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Most nodes whose instances are looked at (one DescribeInstances page).
const SAMPLE: usize = 20;

/// The EC2 instance IDs of `aws:///<zone>/<id>` provider IDs.
pub fn instance_ids<'a>(provider_ids: impl Iterator<Item = &'a str>) -> Vec<String> {
    provider_ids
        .filter_map(|p| p.strip_prefix("aws://"))
        .filter_map(|rest| rest.rsplit('/').next())
        .filter(|id| id.starts_with("i-"))
        .map(str::to_string)
        .collect()
}

/// The cluster ID the tag keys name, when they name exactly one.
pub fn cluster_id_from_tag_keys<'a>(keys: impl Iterator<Item = &'a str>) -> Option<String> {
    let ids: BTreeSet<&str> = keys
        .filter_map(|k| k.strip_prefix(CLUSTER_TAG_PREFIX))
        .filter(|id| !id.is_empty())
        .collect();
    (ids.len() == 1).then(|| ids.into_iter().next().unwrap_or_default().to_string())
}

/// The AWS cluster ID its nodes' instances are tagged with; `Ok(None)` when no node names an
/// instance or the instances do not agree on one.
pub async fn aws_cluster_id(kube: &kube::Client, ec2: &Ec2) -> Result<Option<String>, String> {
    let nodes = Api::<Node>::all(kube.clone())
        .list(&ListParams::default().limit(SAMPLE as u32))
        .await
        .map_err(|e| format!("listing Nodes: {e}"))?;
    let ids = instance_ids(
        nodes
            .items
            .iter()
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref()),
    );
    if ids.is_empty() {
        return Ok(None);
    }
    let keys = ec2
        .describe_instances(&[filter("instance-id", ids)], |i| {
            Some(
                i.tags()
                    .iter()
                    .filter_map(|t| t.key().map(str::to_string))
                    .collect::<Vec<_>>(),
            )
        })
        .await
        .map_err(|e| format!("DescribeInstances: {e}"))?;
    Ok(cluster_id_from_tag_keys(
        keys.iter().flatten().map(String::as_str),
    ))
}

/// The UUID Deckhouse keeps for the cluster (see [`stratus_kube_kit::deckhouse`]).
pub async fn deckhouse_cluster_uuid(kube: &kube::Client) -> Result<Option<String>, String> {
    stratus_kube_kit::deckhouse::cluster_uuid(kube).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_from_provider_ids() {
        let ids = instance_ids(
            [
                "aws:///eu-central-1a/i-0abc",
                "aws://eu-central-1a/i-0def",
                "static://",
                "dvp:///vm-1",
                "aws:///eu-central-1a/not-an-instance",
            ]
            .into_iter(),
        );
        assert_eq!(ids, vec!["i-0abc", "i-0def"]);
    }

    #[test]
    fn one_cluster_tag_names_the_cluster() {
        let keys = [
            "Name",
            "kubernetes.io/cluster/prod",
            "kubernetes.io/cluster/prod",
        ];
        assert_eq!(
            cluster_id_from_tag_keys(keys.into_iter()),
            Some("prod".into())
        );
        let two = ["kubernetes.io/cluster/a", "kubernetes.io/cluster/b"];
        assert_eq!(cluster_id_from_tag_keys(two.into_iter()), None);
        assert_eq!(cluster_id_from_tag_keys(["Name"].into_iter()), None);
        assert_eq!(
            cluster_id_from_tag_keys(["kubernetes.io/cluster/"].into_iter()),
            None
        );
    }
}
