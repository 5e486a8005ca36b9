//! The marks Deckhouse puts on an AWS node the termination handler tainted for a spot
//! interruption (pure): the `node.deckhouse.io/termination-in-progress: "true"` label and the
//! `update.node.deckhouse.io/draining: aws-node-termination-handler` annotation, added when
//! missing (an existing draining annotation is left as it is), never removed.

use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Map, Value};

/// The taint the termination handler puts on a node it drains for a spot interruption.
pub const SPOT_TAINT: &str = "aws-node-termination-handler/spot-itn";
/// The label that tells node-manager the node is going.
pub const TERMINATION_LABEL: &str = "node.deckhouse.io/termination-in-progress";
/// The annotation that tells node-manager who drains it.
pub const DRAINING_ANNOTATION: &str = "update.node.deckhouse.io/draining";

/// The merge patch that marks `node`, or `None` when it is not tainted or already marked.
pub fn plan(node: &Node) -> Option<Value> {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == SPOT_TAINT));
    if !tainted {
        return None;
    }
    let meta = &node.metadata;
    let mut metadata = Map::new();
    if meta
        .labels
        .as_ref()
        .and_then(|l| l.get(TERMINATION_LABEL))
        .map(String::as_str)
        != Some("true")
    {
        metadata.insert("labels".into(), json!({ TERMINATION_LABEL: "true" }));
    }
    if !meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(DRAINING_ANNOTATION))
    {
        metadata.insert(
            "annotations".into(),
            json!({ DRAINING_ANNOTATION: "aws-node-termination-handler" }),
        );
    }
    (!metadata.is_empty()).then(|| json!({ "metadata": metadata }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn marks_only_tainted_nodes_once() {
        let taint = json!({"taints": [{"key": SPOT_TAINT, "effect": "NoSchedule"}]});
        assert_eq!(plan(&node(json!({"metadata": {"name": "a"}}))), None);
        assert_eq!(
            plan(&node(json!({"metadata": {"name": "a"}, "spec": taint}))),
            Some(
                json!({"metadata": {"labels": {TERMINATION_LABEL: "true"}, "annotations": {DRAINING_ANNOTATION: "aws-node-termination-handler"}}})
            )
        );
        let drained_by_other = node(
            json!({"metadata": {"name": "a", "annotations": {DRAINING_ANNOTATION: "bashible"}}, "spec": taint}),
        );
        assert_eq!(
            plan(&drained_by_other),
            Some(json!({"metadata": {"labels": {TERMINATION_LABEL: "true"}}}))
        );
        let marked = node(
            json!({"metadata": {"name": "a", "labels": {TERMINATION_LABEL: "true"}, "annotations": {DRAINING_ANNOTATION: "x"}}, "spec": taint}),
        );
        assert_eq!(plan(&marked), None);
    }
}
