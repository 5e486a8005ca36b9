//! Pure decisions of the service controller: which Services are ours, what to do with each,
//! which nodes receive traffic, and how the request to the cloud looks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::{json, Value};
use stratus_cloud::{Ingress, LoadBalancerRequest, Protocol, ServicePort, ServiceRef, TargetNode};

use crate::node_view::{has_taint, is_ready, provider_id, status_addresses};
use crate::TAINT_UNINITIALIZED;

/// Finalizer guarding cloud clean-up, as upstream.
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Node label excluding a node from load balancer targets.
pub const LABEL_EXCLUDE_FROM_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Taint the cluster autoscaler sets on nodes it is about to remove.
pub const TAINT_TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";

/// What the controller does with one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceAction {
    /// Add the finalizer (first), then create or update the load balancer.
    Ensure {
        /// The finalizer is missing: add it first.
        add_finalizer: bool,
    },
    /// Delete the cloud load balancer, then drop the finalizer.
    Cleanup,
    /// Not ours, or nothing to do.
    Ignore,
}

fn is_load_balancer_type(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

fn has_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// Whether the Service's `loadBalancerClass` leaves it to us (unset, or our own class).
pub fn is_our_class(svc: &Service, our_class: Option<&str>) -> bool {
    match svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref())
    {
        None => true,
        Some(c) => Some(c) == our_class,
    }
}

/// The action for a Service.
///
/// A Service that stops being a LoadBalancer (or is being deleted) while carrying our finalizer
/// is cleaned up, so no cloud load balancer outlives the reason it was made for.
pub fn plan_service(svc: &Service, our_class: Option<&str>) -> ServiceAction {
    let deleting = svc.metadata.deletion_timestamp.is_some();
    let wanted = is_load_balancer_type(svc) && is_our_class(svc, our_class) && !deleting;
    match (wanted, has_finalizer(svc)) {
        (true, present) => ServiceAction::Ensure {
            add_finalizer: !present,
        },
        (false, true) => ServiceAction::Cleanup,
        (false, false) => ServiceAction::Ignore,
    }
}

/// Nodes that receive traffic: initialised, with a providerID, Ready, not excluded by label,
/// not about to be removed by the autoscaler. Sorted by name for stable diffs.
pub fn target_nodes<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Vec<TargetNode> {
    let mut out: Vec<TargetNode> = nodes
        .into_iter()
        .filter(|n| is_ready(n))
        .filter(|n| !has_taint(n, TAINT_UNINITIALIZED) && !has_taint(n, TAINT_TO_BE_DELETED))
        .filter(|n| {
            !n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(LABEL_EXCLUDE_FROM_LB))
        })
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| {
            Some(TargetNode {
                name: n.metadata.name.clone()?,
                provider_id: provider_id(n)?.to_string(),
                labels: n.metadata.labels.clone().unwrap_or_default(),
                addresses: status_addresses(n),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Why a Service cannot be turned into a load-balancer request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("port {port} has protocol {protocol:?}, which is not supported")]
    /// A port protocol Kubernetes does not define.
    BadProtocol {
        /// The port.
        port: i32,
        /// Its protocol.
        protocol: String,
    },
    #[error("port {0} has no nodePort yet")]
    /// A port without a node port yet.
    NoNodePort(i32),
    #[error("port {0} is out of range")]
    /// A port number outside 1–65535.
    BadPort(i32),
    #[error("the Service has {0} ports; a load balancer has at most {1} listeners")]
    /// More ports than the cap (given, allowed).
    TooManyPorts(usize, usize),
}

/// Most ports one load balancer request may carry: absurd objects (a Service may list thousands
/// of ports) are refused with a Warning Event before any cloud call, not attempted.
///
/// 100 is the largest listener count of any load balancer we make (a Classic ELB's quota of
/// listeners per load balancer; an NLB allows 50, which the AWS provider checks itself).
pub const MAX_PORTS: usize = 100;

/// The cloud request for a Service and its target nodes.
pub fn load_balancer_request(
    svc: &Service,
    cluster_name: &str,
    nodes: Vec<TargetNode>,
) -> Result<LoadBalancerRequest, RequestError> {
    let spec = svc.spec.clone().unwrap_or_default();
    let raw_ports = spec.ports.unwrap_or_default();
    if raw_ports.len() > MAX_PORTS {
        return Err(RequestError::TooManyPorts(raw_ports.len(), MAX_PORTS));
    }
    let mut ports = Vec::with_capacity(raw_ports.len());
    for p in raw_ports {
        let protocol =
            Protocol::parse(p.protocol.as_deref()).ok_or_else(|| RequestError::BadProtocol {
                port: p.port,
                protocol: p.protocol.clone().unwrap_or_default(),
            })?;
        let port = u16::try_from(p.port).map_err(|_| RequestError::BadPort(p.port))?;
        let node_port = p
            .node_port
            .filter(|np| *np > 0)
            .ok_or(RequestError::NoNodePort(p.port))?;
        let node_port = u16::try_from(node_port).map_err(|_| RequestError::BadPort(node_port))?;
        ports.push(ServicePort {
            name: p.name.unwrap_or_default(),
            protocol,
            port,
            node_port,
        });
    }
    Ok(LoadBalancerRequest {
        cluster_name: cluster_name.to_string(),
        service: ServiceRef {
            namespace: svc.metadata.namespace.clone().unwrap_or_default(),
            name: svc.metadata.name.clone().unwrap_or_default(),
            uid: svc.metadata.uid.clone().unwrap_or_default(),
        },
        ports,
        annotations: svc.metadata.annotations.clone().unwrap_or_default(),
        source_ranges: spec.load_balancer_source_ranges.unwrap_or_default(),
        local_traffic_only: spec.external_traffic_policy.as_deref() == Some("Local"),
        health_check_node_port: spec
            .health_check_node_port
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0),
        requested_ip: spec.load_balancer_ip.filter(|ip| !ip.is_empty()),
        external_ips: spec.external_ips.unwrap_or_default(),
        load_balancer_class: spec.load_balancer_class,
        nodes,
    })
}

/// The `status` merge patch writing `ingress`, when it differs from what the Service shows.
pub fn ingress_status_patch(svc: &Service, ingress: &[Ingress]) -> Option<Value> {
    let current: Vec<Ingress> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|list| {
            list.iter()
                .map(|i| Ingress {
                    hostname: i.hostname.clone(),
                    ip: i.ip.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    if current == ingress {
        return None;
    }
    let list: Vec<Value> = ingress
        .iter()
        .map(|i| {
            let mut m = BTreeMap::new();
            if let Some(h) = &i.hostname {
                m.insert("hostname", h.clone());
            }
            if let Some(ip) = &i.ip {
                m.insert("ip", ip.clone());
            }
            json!(m)
        })
        .collect();
    Some(json!({"status": {"loadBalancer": {"ingress": list}}}))
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, NodeCondition, NodeSpec, NodeStatus,
        ServicePort as K8sPort, ServiceSpec, ServiceStatus, Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn svc(type_: &str, class: Option<&str>, finalizer: bool, deleting: bool) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("shop".into());
        s.metadata.uid = Some("1234-5678".into());
        s.metadata.finalizers = finalizer.then(|| vec![FINALIZER.to_string()]);
        s.metadata.deletion_timestamp =
            deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        s.spec = Some(ServiceSpec {
            type_: Some(type_.into()),
            load_balancer_class: class.map(str::to_string),
            ports: Some(vec![K8sPort {
                port: 80,
                node_port: Some(30080),
                ..K8sPort::default()
            }]),
            ..ServiceSpec::default()
        });
        s
    }

    #[test]
    fn service_action_table() {
        use ServiceAction::*;
        let ours = Some("stratus.io/aws");
        let cases = [
            (
                svc("LoadBalancer", None, false, false),
                Ensure {
                    add_finalizer: true,
                },
            ),
            (
                svc("LoadBalancer", None, true, false),
                Ensure {
                    add_finalizer: false,
                },
            ),
            (
                svc("LoadBalancer", ours, true, false),
                Ensure {
                    add_finalizer: false,
                },
            ),
            (
                svc("LoadBalancer", Some("service.k8s.aws/nlb"), false, false),
                Ignore,
            ),
            (
                svc("LoadBalancer", Some("service.k8s.aws/nlb"), true, false),
                Cleanup,
            ),
            (svc("ClusterIP", None, true, false), Cleanup),
            (svc("ClusterIP", None, false, false), Ignore),
            (svc("LoadBalancer", None, true, true), Cleanup),
            (svc("LoadBalancer", None, false, true), Ignore),
        ];
        for (i, (s, want)) in cases.into_iter().enumerate() {
            assert_eq!(plan_service(&s, ours), want, "case {i}");
        }
    }

    fn node(
        name: &str,
        ready: bool,
        pid: Option<&str>,
        label: Option<&str>,
        taint: Option<&str>,
    ) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = label.map(|l| [(l.to_string(), String::new())].into());
        n.spec = Some(NodeSpec {
            provider_id: pid.map(str::to_string),
            taints: taint.map(|k| {
                vec![Taint {
                    key: k.into(),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                }]
            }),
            ..NodeSpec::default()
        });
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        n
    }

    #[test]
    fn target_node_predicates() {
        let nodes = vec![
            node("z-ok", true, Some("aws:///a/i-1"), None, None),
            node("a-ok", true, Some("aws:///a/i-2"), Some("role"), None),
            node("not-ready", false, Some("aws:///a/i-3"), None, None),
            node(
                "excluded",
                true,
                Some("aws:///a/i-4"),
                Some(LABEL_EXCLUDE_FROM_LB),
                None,
            ),
            node("no-pid", true, None, None, None),
            node(
                "uninit",
                true,
                Some("aws:///a/i-5"),
                None,
                Some(TAINT_UNINITIALIZED),
            ),
            node(
                "leaving",
                true,
                Some("aws:///a/i-6"),
                None,
                Some(TAINT_TO_BE_DELETED),
            ),
        ];
        let targets = target_nodes(&nodes);
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["a-ok", "z-ok"]);
        assert!(targets[0].addresses.is_empty());
        let mut with_ip = node("b", true, Some("aws:///a/i-7"), None, None);
        with_ip.status.as_mut().unwrap().addresses =
            Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.7".into(),
            }]);
        let t = target_nodes([&with_ip]);
        assert_eq!(
            t[0].addresses[0].address, "10.0.0.7",
            "members of IP load balancers"
        );
    }

    #[test]
    fn request_from_service() {
        let mut s = svc("LoadBalancer", None, true, false);
        let spec = s.spec.as_mut().unwrap();
        spec.external_traffic_policy = Some("Local".into());
        spec.health_check_node_port = Some(31000);
        spec.load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
        spec.external_ips = Some(vec!["192.0.2.7".into()]);
        spec.load_balancer_class = Some("stratus.io/x".into());
        let r = load_balancer_request(&s, "prod", vec![]).unwrap();
        assert_eq!(r.external_ips, vec!["192.0.2.7"]);
        assert_eq!(r.load_balancer_class.as_deref(), Some("stratus.io/x"));
        assert_eq!(r.service.default_load_balancer_name(), "a12345678");
        assert_eq!(
            r.ports,
            vec![ServicePort {
                name: String::new(),
                protocol: Protocol::Tcp,
                port: 80,
                node_port: 30080
            }]
        );
        assert!(r.local_traffic_only);
        assert_eq!(r.health_check_node_port, Some(31000));
        assert_eq!(r.source_ranges, vec!["10.0.0.0/8"]);
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut s = svc("LoadBalancer", None, true, false);
        s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = None;
        assert_eq!(
            load_balancer_request(&s, "c", vec![]).unwrap_err(),
            RequestError::NoNodePort(80)
        );
        s.spec.as_mut().unwrap().ports = Some(
            (0..5000)
                .map(|p| K8sPort {
                    port: p,
                    node_port: Some(30000),
                    ..K8sPort::default()
                })
                .collect(),
        );
        assert!(matches!(
            load_balancer_request(&s, "c", vec![]),
            Err(RequestError::TooManyPorts(5000, _))
        ));
        s.spec.as_mut().unwrap().ports = Some(vec![K8sPort {
            port: 80,
            node_port: Some(30000),
            protocol: Some("QUIC".into()),
            ..K8sPort::default()
        }]);
        assert!(matches!(
            load_balancer_request(&s, "c", vec![]),
            Err(RequestError::BadProtocol { .. })
        ));
    }

    #[test]
    fn ingress_patch_only_on_change() {
        let mut s = svc("LoadBalancer", None, true, false);
        let want = vec![Ingress {
            hostname: Some("lb.example".into()),
            ip: None,
        }];
        let p = ingress_status_patch(&s, &want).unwrap();
        assert_eq!(
            p["status"]["loadBalancer"]["ingress"][0]["hostname"],
            "lb.example"
        );
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    hostname: Some("lb.example".into()),
                    ..LoadBalancerIngress::default()
                }]),
            }),
            ..ServiceStatus::default()
        });
        assert!(ingress_status_patch(&s, &want).is_none());
    }
}
