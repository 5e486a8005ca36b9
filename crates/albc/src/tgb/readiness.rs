//! Pod readiness gates, the status side: a pod whose spec lists the readiness gate
//! `target-health.elbv2.k8s.aws/<binding>` gets that condition set True once its IP target is
//! healthy in the target group, so a rolling update never counts a pod ready before the load
//! balancer sends it traffic. Until then its endpoint (not ready because of the gate) is still
//! registered when its containers are ready. Pure decisions; the driver patches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use stratus_aws_api::elbv2::TargetHealthState;

/// Prefix of the readiness-gate condition type; the binding's name follows.
pub const CONDITION_PREFIX: &str = "target-health.elbv2.k8s.aws/";
/// Namespace label under which upstream's webhook injects the gates.
pub const INJECT_LABEL: &str = "elbv2.k8s.aws/pod-readiness-gate-inject";

/// The condition type of binding `name`.
pub fn condition_type(binding: &str) -> String {
    format!("{CONDITION_PREFIX}{binding}")
}

fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

/// The pod lists the gate (met or not).
pub fn lists_gate(pod: &Pod, cond: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == cond))
}

/// The pod lists the gate and it is not met yet.
pub fn gate_pending(pod: &Pod, cond: &str) -> bool {
    lists_gate(pod, cond) && condition(pod, cond).as_deref() != Some("True")
}

/// A not-ready endpoint of this pod is still a target: the pod lists the gate and its
/// containers are ready. Met or not — once the gate is met the pod's endpoint turns ready only
/// after the kubelet and the EndpointSlice controller catch up, and dropping the target in that
/// window would deregister a healthy pod right after its gate was set (as upstream, which
/// registers every gated pod whose containers are ready).
pub fn registered_while_unready(pod: &Pod, cond: &str) -> bool {
    lists_gate(pod, cond) && containers_ready(pod)
}

/// Its containers are ready (so only gates hold it back).
pub fn containers_ready(pod: &Pod) -> bool {
    condition(pod, "ContainersReady").as_deref() == Some("True")
}

/// Pods (by name) whose pending gate can be set now: their IP is a healthy target. The second
/// value says whether any pending pod must still wait.
pub fn gates_to_set(
    pods: &[&Pod],
    cond: &str,
    health: &[TargetHealthState],
) -> (Vec<String>, bool) {
    let healthy: BTreeMap<&str, bool> = health
        .iter()
        .map(|h| (h.target.id.as_str(), h.state == "healthy"))
        .collect();
    let mut set = Vec::new();
    let mut waiting = false;
    for pod in pods.iter().filter(|p| gate_pending(p, cond)) {
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
        match ip.and_then(|ip| healthy.get(ip)) {
            Some(true) => set.push(pod.metadata.name.clone().unwrap_or_default()),
            _ => waiting = true,
        }
    }
    (set, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::elbv2::TargetRef;

    fn pod(name: &str, ip: &str, gate: bool, met: bool) -> Pod {
        let cond = condition_type("web");
        let mut conditions = vec![serde_json::json!({"type": "ContainersReady", "status": "True"})];
        if met {
            conditions.push(serde_json::json!({"type": cond, "status": "True"}));
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"containers": [], "readinessGates": if gate {
                vec![serde_json::json!({"conditionType": cond})] } else { vec![] }},
            "status": {"podIP": ip, "conditions": conditions}}))
        .unwrap()
    }

    #[test]
    fn healthy_targets_release_their_pods_gates() {
        let h = |ip: &str, state: &str| TargetHealthState {
            target: TargetRef {
                id: ip.into(),
                port: 8080,
            },
            state: state.into(),
        };
        let a = pod("a", "10.0.0.1", true, false);
        let b = pod("b", "10.0.0.2", true, false);
        let c = pod("c", "10.0.0.3", true, true);
        let d = pod("d", "10.0.0.4", false, false);
        let health = [
            h("10.0.0.1", "healthy"),
            h("10.0.0.2", "initial"),
            h("10.0.0.3", "healthy"),
            h("10.0.0.4", "healthy"),
        ];
        let cond = condition_type("web");
        assert_eq!(
            gates_to_set(&[&a, &b, &c, &d], &cond, &health),
            (vec!["a".to_string()], true)
        );
        assert_eq!(
            gates_to_set(&[&a, &c], &cond, &health),
            (vec!["a".to_string()], false)
        );
        assert!(containers_ready(&a));
    }

    #[test]
    fn a_gated_pod_with_ready_containers_stays_a_target_after_its_gate_is_met() {
        let cond = condition_type("web");
        let met = pod("c", "10.0.0.3", true, true);
        let pending = pod("a", "10.0.0.1", true, false);
        let ungated = pod("d", "10.0.0.4", false, false);
        assert!(registered_while_unready(&met, &cond));
        assert!(registered_while_unready(&pending, &cond));
        assert!(!registered_while_unready(&ungated, &cond));
        let mut starting = pod("e", "10.0.0.5", true, false);
        starting.status.as_mut().unwrap().conditions = Some(vec![]);
        assert!(
            !registered_while_unready(&starting, &cond),
            "containers not ready"
        );
    }
}
