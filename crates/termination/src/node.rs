//! Node writes: cordon/uncordon, upstream's labels and taints, the exclude-from-load-balancers
//! label and the out-of-service taint. Patches are built by pure functions; every write is a
//! single merge or strategic-merge patch (no read-modify-write), throttled, and logged instead
//! of sent in dry-run mode.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use crate::throttle::Throttle;

/// Label naming what to do after a scheduled reboot (value [`UNCORDON_AFTER_REBOOT`]).
pub const ACTION_LABEL: &str = "aws-node-termination-handler/action";
/// Label with the time [`ACTION_LABEL`] was set, in Unix seconds.
pub const ACTION_TIME_LABEL: &str = "aws-node-termination-handler/action-time";
/// Label with the id of the scheduled event the node was marked for (cut to 63 characters).
pub const EVENT_ID_LABEL: &str = "aws-node-termination-handler/event-id";
/// [`ACTION_LABEL`]'s value: uncordon the node once it has rebooted.
pub const UNCORDON_AFTER_REBOOT: &str = "UncordonAfterReboot";
/// Label that takes the node out of external load balancers (`--exclude-from-load-balancers`).
pub const EXCLUDE_FROM_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// The value marks the label as ours, so only ours is removed.
pub const EXCLUDE_FROM_LB_VALUE: &str = "aws-node-termination-handler";
// Taints added with `--taint-node` (effect `--taint-effect`, value the event id).
/// Taint for a Spot interruption notice.
pub const SPOT_ITN_TAINT: &str = "aws-node-termination-handler/spot-itn";
/// Taint for scheduled maintenance.
pub const SCHEDULED_MAINTENANCE_TAINT: &str = "aws-node-termination-handler/scheduled-maintenance";
/// Taint for an ASG termination.
pub const ASG_LIFECYCLE_TERMINATION_TAINT: &str =
    "aws-node-termination-handler/asg-lifecycle-termination";
/// Taint for a rebalance recommendation.
pub const REBALANCE_RECOMMENDATION_TAINT: &str =
    "aws-node-termination-handler/rebalance-recommendation";
/// Kubernetes' out-of-service taint (`--enable-out-of-service-taint`, effect `NoExecute`):
/// lets volumes detach from a node that is shutting down.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";
/// [`OUT_OF_SERVICE_TAINT`]'s value, as upstream.
pub const OUT_OF_SERVICE_VALUE: &str = "nodeshutdown";
/// Every taint this handler adds for events.
pub const NTH_TAINTS: &[&str] = &[
    SPOT_ITN_TAINT,
    SCHEDULED_MAINTENANCE_TAINT,
    ASG_LIFECYCLE_TERMINATION_TAINT,
    REBALANCE_RECOMMENDATION_TAINT,
];
/// Label and taint values are at most 63 characters.
const MAX_VALUE_LEN: usize = 63;

/// A value cut to the label/taint limit (upstream truncates event ids the same way).
pub fn truncate_value(value: &str) -> String {
    value.chars().take(MAX_VALUE_LEN).collect()
}

/// Merge patch setting `spec.unschedulable`.
pub fn cordon_patch(unschedulable: bool) -> Value {
    json!({ "spec": { "unschedulable": unschedulable } })
}

/// Merge patch setting (Some) or removing (None) labels.
pub fn labels_patch(labels: &[(&str, Option<String>)]) -> Value {
    let map: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                v.as_ref().map_or(Value::Null, |v| Value::String(v.clone())),
            )
        })
        .collect();
    json!({ "metadata": { "labels": map } })
}

/// Strategic merge patch adding a taint (taints merge by key).
pub fn add_taint_patch(key: &str, value: &str, effect: &str) -> Value {
    json!({ "spec": { "taints": [ { "key": key, "value": truncate_value(value), "effect": effect } ] } })
}

/// Merge patch leaving `node` without the taints `keys` (None: none of them is there), with
/// the node's resourceVersion as a precondition.
pub fn remove_taints_patch(node: &Node, keys: &[&str]) -> Option<Value> {
    let taints = node.spec.as_ref()?.taints.clone().unwrap_or_default();
    let kept: Vec<_> = taints
        .iter()
        .filter(|t| !keys.contains(&t.key.as_str()))
        .collect();
    (kept.len() != taints.len()).then(|| {
        json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "spec": { "taints": kept },
        })
    })
}

/// Writes to Nodes.
#[derive(Clone)]
pub struct NodeWriter {
    api: Api<Node>,
    throttle: Arc<Throttle>,
    dry_run: bool,
}

impl NodeWriter {
    /// A writer whose calls wait on `throttle`; with `dry_run` (`--dry-run`) patches are only
    /// logged.
    pub fn new(client: Client, throttle: Arc<Throttle>, dry_run: bool) -> NodeWriter {
        NodeWriter {
            api: Api::all(client),
            throttle,
            dry_run,
        }
    }

    async fn patch(&self, node: &str, what: &str, patch: Patch<Value>) -> Result<(), kube::Error> {
        if self.dry_run {
            tracing::info!(node, what, "dry-run: would have patched the node");
            return Ok(());
        }
        self.throttle.acquire().await;
        self.api
            .patch(node, &PatchParams::default(), &patch)
            .await
            .map(drop)
    }

    /// Reads a node (None: not found).
    pub async fn get(&self, node: &str) -> Result<Option<Node>, kube::Error> {
        self.throttle.acquire().await;
        self.api.get_opt(node).await
    }

    /// Cordons (`unschedulable`) or uncordons `node`.
    pub async fn cordon(&self, node: &str, unschedulable: bool) -> Result<(), kube::Error> {
        let what = if unschedulable { "cordon" } else { "uncordon" };
        self.patch(node, what, Patch::Merge(cordon_patch(unschedulable)))
            .await
    }

    /// Sets (Some) or removes (None) labels on `node`.
    pub async fn set_labels(
        &self,
        node: &str,
        labels: &[(&str, Option<String>)],
    ) -> Result<(), kube::Error> {
        self.patch(node, "labels", Patch::Merge(labels_patch(labels)))
            .await
    }

    /// Adds (or replaces) the taint `key` with `value` (cut to 63 characters) and `effect`.
    pub async fn add_taint(
        &self,
        node: &str,
        key: &str,
        value: &str,
        effect: &str,
    ) -> Result<(), kube::Error> {
        self.patch(
            node,
            key,
            Patch::Strategic(add_taint_patch(key, value, effect)),
        )
        .await
    }

    /// Removes taints by key: a merge patch of the remaining list, guarded by the node's
    /// resourceVersion (a concurrent change makes it fail with a conflict and retry).
    pub async fn remove_taints(&self, node: &str, keys: &[&str]) -> Result<(), kube::Error> {
        for _ in 0..5 {
            let Some(current) = self.get(node).await? else {
                return Ok(());
            };
            let Some(patch) = remove_taints_patch(&current, keys) else {
                return Ok(());
            };
            match self.patch(node, "remove taints", Patch::Merge(patch)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                other => return other,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches() {
        assert_eq!(cordon_patch(true), json!({"spec": {"unschedulable": true}}));
        assert_eq!(
            labels_patch(&[(ACTION_LABEL, Some("x".into())), (EVENT_ID_LABEL, None)]),
            json!({"metadata": {"labels": {ACTION_LABEL: "x", EVENT_ID_LABEL: null}}})
        );
        let long = "spot-itn-".to_owned() + &"a".repeat(64);
        let p = add_taint_patch(SPOT_ITN_TAINT, &long, "NoSchedule");
        assert_eq!(p["spec"]["taints"][0]["value"].as_str().unwrap().len(), 63);
        let mut node = Node::default();
        node.metadata.resource_version = Some("7".into());
        let taint = |key: &str| k8s_openapi::api::core::v1::Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(vec![taint(SPOT_ITN_TAINT), taint("other")]),
            ..Default::default()
        });
        assert_eq!(
            remove_taints_patch(&node, NTH_TAINTS),
            Some(
                json!({"metadata": {"resourceVersion": "7"}, "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}})
            )
        );
        assert_eq!(
            remove_taints_patch(&node, &[REBALANCE_RECOMMENDATION_TAINT]),
            None
        );
    }
}
