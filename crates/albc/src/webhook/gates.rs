//! Pod readiness gates, the injection side (upstream's `mpod.elbv2.k8s.aws`): which
//! `target-health.elbv2.k8s.aws/<binding>` gates a new pod gets, and the JSON patch adding them.
//! A pod gets the gate of every `ip` binding of its namespace whose Service selects it (a
//! Service without a selector selects nothing; a binding whose Service is unknown is skipped),
//! unless it already lists it. Pure; the caches are read by the caller.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::crd::TargetGroupBinding;
use crate::tgb::readiness::condition_type;
use crate::tgb::targets::TargetType;

/// What the decision needs of a new pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodView {
    /// The pod's namespace.
    pub namespace: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.readinessGates[].conditionType`; `None` when the pod has no `readinessGates`.
    pub gates: Option<Vec<String>>,
}

impl PodView {
    /// Reads a pod as the API server sends it (any JSON, so a field this build does not know
    /// never fails the pod); `namespace` is the request's (a new pod's metadata may lack it).
    pub fn of(pod: &Value, namespace: &str) -> PodView {
        let labels = pod["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let gates = pod["spec"]["readinessGates"].as_array().map(|gates| {
            gates
                .iter()
                .filter_map(|g| g["conditionType"].as_str().map(str::to_string))
                .collect()
        });
        PodView {
            namespace: namespace.to_string(),
            labels,
            gates,
        }
    }
}

/// The condition types to add to `pod`, in binding-name order: one per `ip` binding of the pod's
/// namespace whose Service (`selector_of(name)`, `None` when unknown) selects the pod.
pub fn gates_to_add<'a>(
    pod: &PodView,
    bindings: impl IntoIterator<Item = &'a TargetGroupBinding>,
    selector_of: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> Vec<String> {
    let mut names: Vec<&str> = bindings
        .into_iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(pod.namespace.as_str()))
        .filter(|b| b.spec.target_type.as_deref() == Some(TargetType::Ip.as_str()))
        .filter(|b| selector_of(&b.spec.service_ref.name).is_some_and(|s| selects(&s, &pod.labels)))
        .filter_map(|b| b.metadata.name.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    let present = pod.gates.as_deref().unwrap_or_default();
    names
        .into_iter()
        .map(condition_type)
        .filter(|c| !present.contains(c))
        .collect()
}

/// A Service selector selects a pod: not empty, and every pair among the pod's labels.
pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The RFC 6902 patch adding `gates` to a pod whose current gates are `existing`
/// (`None`: the pod has no `spec.readinessGates`, so the list is added whole).
pub fn gate_patch(existing: Option<&[String]>, gates: &[String]) -> json_patch::Patch {
    let entries: Vec<Value> = gates.iter().map(|c| json!({"conditionType": c})).collect();
    let ops: Vec<Value> = match existing {
        None => vec![json!({"op": "add", "path": "/spec/readinessGates", "value": entries})],
        Some(_) => entries
            .into_iter()
            .map(|e| json!({"op": "add", "path": "/spec/readinessGates/-", "value": e}))
            .collect(),
    };
    serde_json::from_value(Value::Array(ops)).expect("add operations are valid JSON patches")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{ServiceReference, TargetGroupBindingSpec};

    fn binding(
        ns: &str,
        name: &str,
        service: &str,
        target_type: Option<&str>,
    ) -> TargetGroupBinding {
        let mut b = TargetGroupBinding::new(
            name,
            TargetGroupBindingSpec {
                target_group_arn: format!("arn:{name}"),
                target_type: target_type.map(str::to_string),
                service_ref: ServiceReference {
                    name: service.into(),
                    ..ServiceReference::default()
                },
                ..TargetGroupBindingSpec::default()
            },
        );
        b.metadata.namespace = Some(ns.into());
        b
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn services(name: &str) -> Option<BTreeMap<String, String>> {
        match name {
            "web" => Some(map(&[("app", "web")])),
            "web-tier" => Some(map(&[("app", "web"), ("tier", "front")])),
            "api" => Some(map(&[("app", "api")])),
            "headless" => Some(BTreeMap::new()),
            _ => None,
        }
    }

    fn pod(labels: &[(&str, &str)], gates: Option<&[&str]>) -> PodView {
        PodView {
            namespace: "shop".into(),
            labels: map(labels),
            gates: gates.map(|g| g.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn the_ip_bindings_whose_service_selects_the_pod_in_its_namespace() {
        let bindings = [
            binding("shop", "web-b", "web", Some("ip")),
            binding("shop", "web-a", "web", Some("ip")),
            binding("shop", "tier", "web-tier", Some("ip")),
            binding("shop", "api", "api", Some("ip")),
            binding("shop", "inst", "web", Some("instance")),
            binding("shop", "untyped", "web", None),
            binding("other", "elsewhere", "web", Some("ip")),
            binding("shop", "gone", "missing", Some("ip")),
            binding("shop", "all", "headless", Some("ip")),
        ];
        let web = pod(&[("app", "web"), ("pod-template-hash", "x")], None);
        assert_eq!(
            gates_to_add(&web, &bindings, services),
            vec![
                "target-health.elbv2.k8s.aws/web-a",
                "target-health.elbv2.k8s.aws/web-b"
            ]
        );
        let front = pod(&[("app", "web"), ("tier", "front")], None);
        assert_eq!(gates_to_add(&front, &bindings, services).len(), 3);
        let other = pod(&[("app", "db")], None);
        assert!(gates_to_add(&other, &bindings, services).is_empty());
        let unlabelled = pod(&[], None);
        assert!(gates_to_add(&unlabelled, &bindings, services).is_empty());
    }

    #[test]
    fn present_gates_are_not_added_again() {
        let bindings = [
            binding("shop", "web-a", "web", Some("ip")),
            binding("shop", "web-b", "web", Some("ip")),
        ];
        let p = pod(
            &[("app", "web")],
            Some(&["target-health.elbv2.k8s.aws/web-a", "example.com/other"]),
        );
        assert_eq!(
            gates_to_add(&p, &bindings, services),
            vec!["target-health.elbv2.k8s.aws/web-b"]
        );
    }

    #[test]
    fn patch_adds_the_list_or_appends_to_it() {
        let gates = vec!["target-health.elbv2.k8s.aws/a".to_string()];
        let whole = serde_json::to_value(gate_patch(None, &gates)).unwrap();
        assert_eq!(
            whole,
            json!([{"op": "add", "path": "/spec/readinessGates",
                    "value": [{"conditionType": "target-health.elbv2.k8s.aws/a"}]}])
        );
        let mut doc = json!({"spec": {"readinessGates": [{"conditionType": "x"}]}});
        let existing = vec!["x".to_string()];
        json_patch::patch(&mut doc, &gate_patch(Some(&existing), &gates)).unwrap();
        assert_eq!(
            doc["spec"]["readinessGates"],
            json!([{"conditionType": "x"}, {"conditionType": "target-health.elbv2.k8s.aws/a"}])
        );
    }

    #[test]
    fn pod_view_reads_any_pod_json() {
        let v = PodView::of(
            &json!({"metadata": {"labels": {"app": "web"}},
                    "spec": {"readinessGates": [{"conditionType": "x"}], "unknownField": 1}}),
            "shop",
        );
        assert_eq!(v.labels, map(&[("app", "web")]));
        assert_eq!(v.gates, Some(vec!["x".to_string()]));
        let bare = PodView::of(&json!({"spec": {}}), "shop");
        assert_eq!((bare.labels.len(), bare.gates), (0, None));
    }
}
