//! The targets a TargetGroupBinding wants, as a pure function of its Service, the Service's
//! EndpointSlices and the Nodes: pod IPs on the endpoint port (`ip`), or the instances behind
//! ready nodes on the Service's NodePort (`instance`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use stratus_aws_api::elbv2::TargetRef;
use stratus_aws_api::provider_id::AwsProviderId;

/// The label EndpointSlices carry naming their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Nodes with this label never become targets.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// How targets are addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetType {
    /// Pod IPs.
    Ip,
    /// EC2 instances on the NodePort.
    Instance,
}

impl TargetType {
    /// Parses `ip` / `instance`.
    pub fn parse(s: &str) -> Result<TargetType, TargetError> {
        match s {
            "ip" => Ok(TargetType::Ip),
            "instance" => Ok(TargetType::Instance),
            other => Err(TargetError::TargetType(other.to_string())),
        }
    }

    /// The spelling in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetType::Ip => "ip",
            TargetType::Instance => "instance",
        }
    }
}

/// Why the wanted targets cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The Service does not exist.
    #[error("service {0} not found")]
    ServiceNotFound(String),
    /// No such port on the Service.
    #[error("service {service} has no port {port}")]
    PortNotFound {
        /// The Service.
        service: String,
        /// The port asked for.
        port: String,
    },
    /// Instance mode needs a NodePort.
    #[error("service {service} port {port} has no nodePort: instance targets need a NodePort or LoadBalancer Service")]
    NoNodePort {
        /// The Service.
        service: String,
        /// The port.
        port: String,
    },
    /// Neither `ip` nor `instance`.
    #[error("target type {0:?} is not supported (ip or instance)")]
    TargetType(String),
    /// The node selector uses an operator we do not know.
    #[error("node selector operator {0:?} is not supported")]
    Selector(String),
}

impl TargetError {
    /// Short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            TargetError::ServiceNotFound(_) => "ServiceNotFound",
            TargetError::PortNotFound { .. } => "PortNotFound",
            TargetError::NoNodePort { .. } => "NoNodePort",
            TargetError::TargetType(_) => "InvalidTargetType",
            TargetError::Selector(_) => "InvalidNodeSelector",
        }
    }
}

/// The Service port `port` names (number or name).
pub fn service_port<'a>(
    svc: &'a Service,
    port: &IntOrString,
) -> Result<&'a ServicePort, TargetError> {
    let name = svc.metadata.name.clone().unwrap_or_default();
    svc.spec
        .as_ref()
        .map(|s| s.ports.as_deref().unwrap_or_default())
        .unwrap_or_default()
        .iter()
        .find(|p| match port {
            IntOrString::Int(n) => p.port == *n,
            IntOrString::String(s) => p.name.as_deref() == Some(s.as_str()),
        })
        .ok_or_else(|| TargetError::PortNotFound {
            service: name,
            port: match port {
                IntOrString::Int(n) => n.to_string(),
                IntOrString::String(s) => s.clone(),
            },
        })
}

/// Pod IP targets: every ready endpoint address of the slices, on the slice port named like the
/// Service port (unnamed ports match the empty name). A not-ready endpoint counts too when
/// `held_by_gate` says its pod (by name) lists this binding's readiness gate with its
/// containers ready (see [`crate::tgb::readiness::registered_while_unready`]).
pub fn ip_targets(
    port: &ServicePort,
    slices: &[&EndpointSlice],
    held_by_gate: &dyn Fn(&str) -> bool,
) -> BTreeSet<TargetRef> {
    let wanted = port.name.clone().unwrap_or_default();
    let mut out = BTreeSet::new();
    for slice in slices {
        let Some(number) = slice
            .ports
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|p| p.name.clone().unwrap_or_default() == wanted)
            .and_then(|p| p.port)
        else {
            continue;
        };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            let terminating = ep
                .conditions
                .as_ref()
                .and_then(|c| c.terminating)
                .unwrap_or(false);
            let pod = ep
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.as_deref());
            if terminating || !(ready || pod.is_some_and(held_by_gate)) {
                continue;
            }
            for address in &ep.addresses {
                out.insert(TargetRef {
                    id: address.clone(),
                    port: number,
                });
            }
        }
    }
    out
}

/// Whether a node's labels satisfy a label selector.
pub fn selector_matches(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, TargetError> {
    let Some(selector) = selector else {
        return Ok(true);
    };
    for (k, v) in selector.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return Ok(false);
        }
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let have = labels.get(&e.key);
        let ok = match e.operator.as_str() {
            "In" => have.is_some_and(|h| values.contains(h)),
            "NotIn" => have.is_none_or(|h| !values.contains(h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            other => return Err(TargetError::Selector(other.to_string())),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// Instance targets: the instance of every ready, schedulable-for-LB node matching `selector`,
/// on the Service port's NodePort.
pub fn instance_targets(
    svc: &Service,
    port: &ServicePort,
    nodes: &[&Node],
    selector: Option<&LabelSelector>,
) -> Result<BTreeSet<TargetRef>, TargetError> {
    let node_port = port.node_port.ok_or_else(|| TargetError::NoNodePort {
        service: svc.metadata.name.clone().unwrap_or_default(),
        port: port.port.to_string(),
    })?;
    let mut out = BTreeSet::new();
    for node in nodes {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        if labels.contains_key(EXCLUDE_LABEL)
            || !node_ready(node)
            || !selector_matches(selector, &labels)?
        {
            continue;
        }
        let Some(pid) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) else {
            continue;
        };
        if let Ok(parsed) = AwsProviderId::parse(pid) {
            out.insert(TargetRef {
                id: parsed.instance.as_str().to_string(),
                port: node_port,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc() -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080},
                {"name": "admin", "port": 9000}]}}))
        .unwrap()
    }

    fn slice(ports: serde_json::Value, eps: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-abc", "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4", "ports": ports, "endpoints": eps}))
        .unwrap()
    }

    fn t(id: &str, port: i32) -> TargetRef {
        TargetRef {
            id: id.into(),
            port,
        }
    }

    #[test]
    fn ports_by_number_or_name() {
        let s = svc();
        assert_eq!(service_port(&s, &IntOrString::Int(80)).unwrap().port, 80);
        assert_eq!(
            service_port(&s, &IntOrString::String("admin".into()))
                .unwrap()
                .port,
            9000
        );
        assert_eq!(
            service_port(&s, &IntOrString::Int(81))
                .unwrap_err()
                .category(),
            "PortNotFound"
        );
    }

    #[test]
    fn ready_endpoints_on_the_named_slice_port() {
        let s = svc();
        let p = service_port(&s, &IntOrString::Int(80)).unwrap();
        let sl = slice(
            serde_json::json!([{"name": "admin", "port": 9001}, {"name": "http", "port": 8080}]),
            serde_json::json!([
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"]},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.4"], "conditions": {"ready": true, "terminating": true}},
                {"addresses": ["10.0.0.5"], "conditions": {"ready": false},
                 "targetRef": {"kind": "Pod", "name": "gated"}}]),
        );
        let got = ip_targets(p, &[&sl], &|_| false);
        assert_eq!(
            got,
            [t("10.0.0.1", 8080), t("10.0.0.2", 8080)]
                .into_iter()
                .collect()
        );
        let got = ip_targets(p, &[&sl], &|pod| pod == "gated");
        assert!(got.contains(&t("10.0.0.5", 8080)));
        assert!(!got.contains(&t("10.0.0.3", 8080)));
    }

    #[test]
    fn instances_of_ready_selected_nodes_on_the_node_port() {
        let s = svc();
        let node = |name: &str, ready: &str, labels: serde_json::Value| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}}))
            .unwrap()
        };
        let a = node("0a", "True", serde_json::json!({"pool": "web"}));
        let b = node("0b", "False", serde_json::json!({"pool": "web"}));
        let c = node("0c", "True", serde_json::json!({"pool": "db"}));
        let d = node(
            "0d",
            "True",
            serde_json::json!({"pool": "web", EXCLUDE_LABEL: ""}),
        );
        let sel: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"pool": "web"}})).unwrap();
        let p = service_port(&s, &IntOrString::Int(80)).unwrap();
        let got = instance_targets(&s, p, &[&a, &b, &c, &d], Some(&sel)).unwrap();
        assert_eq!(got, [t("i-0a", 30080)].into_iter().collect());
        let admin = service_port(&s, &IntOrString::Int(9000)).unwrap();
        assert_eq!(
            instance_targets(&s, admin, &[&a], None)
                .unwrap_err()
                .category(),
            "NoNodePort"
        );
    }
}
