//! Pure decisions of the node-lifecycle controller.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{json, Value};

use crate::node_view::{has_taint, is_ready, provider_id, taints};
use crate::{TAINT_SHUTDOWN, TAINT_UNINITIALIZED};

/// What to do with one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Leave the node as it is.
    Nothing,
    /// Delete the node: its instance is gone.
    Delete,
    /// Taint the node: its instance is shut down.
    AddShutdownTaint,
    /// Untaint the node: its instance runs again.
    RemoveShutdownTaint,
}

/// Whether the controller looks at this node at all: it must be initialised and carry a
/// providerID of this cloud (`<scheme>://…`; any scheme when `scheme` is `None`). Static nodes
/// without a providerID, and nodes another provider owns (Deckhouse's `static://`, a second
/// cloud in a hybrid cluster), are never touched and cost no cloud call, as Deckhouse's patched
/// controllers leave them alone.
pub fn is_managed(node: &Node, scheme: Option<&str>) -> bool {
    let Some(pid) = provider_id(node) else {
        return false;
    };
    let ours = scheme.is_none_or(|scheme| {
        pid.strip_prefix(scheme)
            .is_some_and(|rest| rest.starts_with("://"))
    });
    ours && !has_taint(node, TAINT_UNINITIALIZED)
}

/// What one lifecycle pass does before and besides asking the cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassPlan<T> {
    /// Ready nodes still carrying the shutdown taint: untainted without asking the cloud (a node
    /// whose kubelet reports Ready runs), as upstream.
    pub untaint: Vec<T>,
    /// Managed nodes that are not Ready: the cloud is asked about these, all together, and each
    /// then gets [`plan_lifecycle`].
    pub check: Vec<T>,
}

impl<T> Default for PassPlan<T> {
    fn default() -> Self {
        Self {
            untaint: Vec::new(),
            check: Vec::new(),
        }
    }
}

/// Sorts the nodes of one pass: static, foreign ([`is_managed`] with `scheme`) and
/// uninitialised nodes are left alone, Ready nodes cost no cloud call (only a leftover shutdown
/// taint is removed), NotReady ones are checked.
pub fn plan_pass<T: Borrow<Node>>(
    nodes: impl IntoIterator<Item = T>,
    scheme: Option<&str>,
) -> PassPlan<T> {
    let mut plan = PassPlan::default();
    for n in nodes {
        let node = n.borrow();
        if !is_managed(node, scheme) {
            continue;
        }
        if !is_ready(node) {
            plan.check.push(n);
        } else if has_taint(node, TAINT_SHUTDOWN) {
            plan.untaint.push(n);
        }
    }
    plan
}

/// The action for a managed node given what the cloud said.
///
/// As upstream: only a node that is not Ready is deleted or tainted; the shutdown taint is removed
/// as soon as the instance runs again.
pub fn plan_lifecycle(node: &Node, exists: bool, shutdown: bool) -> LifecycleAction {
    let tainted = has_taint(node, TAINT_SHUTDOWN);
    let ready = is_ready(node);
    if !exists {
        return if ready {
            LifecycleAction::Nothing
        } else {
            LifecycleAction::Delete
        };
    }
    match (shutdown, tainted) {
        (true, false) if !ready => LifecycleAction::AddShutdownTaint,
        (false, true) => LifecycleAction::RemoveShutdownTaint,
        _ => LifecycleAction::Nothing,
    }
}

/// The merge patch carrying out a taint action (guarded by resourceVersion).
pub fn taint_patch(node: &Node, action: &LifecycleAction) -> Option<Value> {
    let mut list: Vec<Taint> = taints(node)
        .iter()
        .filter(|t| t.key != TAINT_SHUTDOWN)
        .cloned()
        .collect();
    match action {
        LifecycleAction::AddShutdownTaint => list.push(Taint {
            key: TAINT_SHUTDOWN.to_string(),
            effect: "NoSchedule".to_string(),
            ..Taint::default()
        }),
        LifecycleAction::RemoveShutdownTaint => {}
        _ => return None,
    }
    Some(json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": list},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(pid: Option<&str>, ready: Option<bool>, taint_keys: &[&str]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n".into());
        n.metadata.resource_version = Some("7".into());
        n.spec = Some(NodeSpec {
            provider_id: pid.map(str::to_string),
            taints: Some(
                taint_keys
                    .iter()
                    .map(|k| Taint {
                        key: k.to_string(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    })
                    .collect(),
            ),
            ..NodeSpec::default()
        });
        n.status = ready.map(|r| NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if r { "True" } else { "False" }.into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        n
    }

    #[test]
    fn decision_table() {
        use LifecycleAction::*;
        let pid = Some("aws:///z/i-1");
        let cases = [
            // (ready, taints, exists, shutdown, expected)
            (None, vec![], false, false, Delete),
            (Some(false), vec![], false, false, Delete),
            (Some(true), vec![], false, false, Nothing),
            (None, vec![], true, true, AddShutdownTaint),
            (Some(true), vec![], true, true, Nothing),
            (None, vec![TAINT_SHUTDOWN], true, true, Nothing),
            (None, vec![TAINT_SHUTDOWN], true, false, RemoveShutdownTaint),
            (
                Some(true),
                vec![TAINT_SHUTDOWN],
                true,
                false,
                RemoveShutdownTaint,
            ),
            (None, vec![], true, false, Nothing),
        ];
        for (i, (ready, t, exists, shutdown, want)) in cases.into_iter().enumerate() {
            let n = node(pid, ready, &t);
            assert_eq!(plan_lifecycle(&n, exists, shutdown), want, "case {i}");
        }
    }

    #[test]
    fn a_pass_checks_only_managed_nodes_that_are_not_ready() {
        let pid = Some("aws:///z/i-1");
        let cases: [(&str, Node, &str); 7] = [
            ("static", node(None, Some(false), &[]), "skip"),
            (
                "uninitialised",
                node(pid, Some(false), &[TAINT_UNINITIALIZED]),
                "skip",
            ),
            ("ready", node(pid, Some(true), &[]), "skip"),
            (
                "ready and tainted",
                node(pid, Some(true), &[TAINT_SHUTDOWN]),
                "untaint",
            ),
            ("not ready", node(pid, Some(false), &[]), "check"),
            ("no Ready condition", node(pid, None, &[]), "check"),
            (
                "not ready and tainted",
                node(pid, Some(false), &[TAINT_SHUTDOWN]),
                "check",
            ),
        ];
        for (what, n, want) in cases {
            let plan = plan_pass([&n], Some("aws"));
            let got = match (plan.untaint.len(), plan.check.len()) {
                (0, 0) => "skip",
                (1, 0) => "untaint",
                (0, 1) => "check",
                other => panic!("{what}: {other:?}"),
            };
            assert_eq!(got, want, "{what}");
        }
        let all: Vec<Node> = (0..3)
            .map(|i| node(pid, Some(i == 1), &[]))
            .chain([node(pid, Some(true), &[])])
            .collect();
        let plan = plan_pass(all.iter(), Some("aws"));
        assert_eq!((plan.check.len(), plan.untaint.len()), (2, 0));
        let ready: Vec<Node> = (0..1000).map(|_| node(pid, Some(true), &[])).collect();
        assert_eq!(
            plan_pass(ready.iter(), Some("aws")),
            PassPlan::default(),
            "a cluster of Ready nodes asks the cloud nothing"
        );
    }

    #[test]
    fn static_and_uninitialised_nodes_are_not_managed() {
        let aws = Some("aws");
        assert!(!is_managed(&node(None, None, &[]), aws));
        assert!(!is_managed(&node(Some(""), None, &[]), aws));
        assert!(!is_managed(
            &node(Some("aws:///z/i-1"), None, &[TAINT_UNINITIALIZED]),
            aws
        ));
        assert!(is_managed(
            &node(Some("aws:///z/i-1"), None, &["other"]),
            aws
        ));
        assert!(is_managed(&node(Some("aws:///z/i-1"), None, &[]), None));
    }

    #[test]
    fn nodes_of_another_provider_are_left_alone() {
        let aws = Some("aws");
        for foreign in [
            "static://",
            "static://node-1",
            "openstack:///abc",
            "awsx:///z/i-1",
            "kind://docker/n",
        ] {
            let n = node(Some(foreign), Some(false), &[]);
            assert!(!is_managed(&n, aws), "{foreign}");
            assert_eq!(plan_pass([&n], aws), PassPlan::default(), "{foreign}");
        }
        assert!(is_managed(
            &node(Some("dvp://vm-1"), Some(false), &[]),
            Some("dvp")
        ));
    }

    #[test]
    fn taint_patches_keep_other_taints() {
        let n = node(Some("p"), None, &["other"]);
        let add = taint_patch(&n, &LifecycleAction::AddShutdownTaint).unwrap();
        assert_eq!(add["spec"]["taints"].as_array().unwrap().len(), 2);
        assert_eq!(add["metadata"]["resourceVersion"], "7");
        let n = node(Some("p"), None, &["other", TAINT_SHUTDOWN]);
        let rm = taint_patch(&n, &LifecycleAction::RemoveShutdownTaint).unwrap();
        assert_eq!(rm["spec"]["taints"][0]["key"], "other");
        assert_eq!(rm["spec"]["taints"].as_array().unwrap().len(), 1);
        assert!(taint_patch(&n, &LifecycleAction::Delete).is_none());
    }
}
