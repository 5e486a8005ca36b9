//! The desired parent-cluster objects of one tenant load balancer, as pure functions: the parent
//! Service (Deckhouse's name rule `a` + the tenant Service UID without dashes, cut to 32; ports
//! forwarded to the tenant NodePorts; annotations, `externalTrafficPolicy`, `loadBalancerClass`,
//! `loadBalancerIP` and `externalIPs` copied; selecting the VMs that carry the per-LB label) and
//! the VM label changes that make the selection follow the target nodes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use stratus_cloud::load_balancer::Protocol;
use stratus_cloud::{LoadBalancerRequest, ServiceKey, ServiceRef};
use stratus_dvp_api::labels::{lb_selector_key, LB_LABEL_VALUE};

/// Label on every parent Service this provider manages (the Service watch selects on it).
pub const MANAGED_LABEL: &str = "dvp.stratus.io/managed-load-balancer";
/// Annotation naming the tenant Service (`<namespace>/<name>`) a parent Service serves.
pub const TENANT_SERVICE_ANNOTATION: &str = "dvp.stratus.io/tenant-service";

/// The parent Service's name for a tenant Service.
pub fn parent_name(service: &ServiceRef) -> String {
    service.default_load_balancer_name()
}

fn protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Sctp => "SCTP",
    }
}

/// The parent Service for `request` in `namespace`.
pub fn parent_service(request: &LoadBalancerRequest, namespace: &str) -> Service {
    let name = parent_name(&request.service);
    let mut annotations = request.annotations.clone();
    annotations.insert(
        TENANT_SERVICE_ANNOTATION.into(),
        format!("{}/{}", request.service.namespace, request.service.name),
    );
    let ports = request
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| ServicePort {
            name: Some(if p.name.is_empty() {
                format!("port-{i}")
            } else {
                p.name.clone()
            }),
            protocol: Some(protocol(p.protocol).into()),
            port: i32::from(p.port),
            target_port: Some(IntOrString::Int(i32::from(p.node_port))),
            ..ServicePort::default()
        })
        .collect();
    Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(MANAGED_LABEL.into(), "true".into())])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(ports),
            selector: Some(BTreeMap::from([(
                lb_selector_key(&name),
                LB_LABEL_VALUE.into(),
            )])),
            external_traffic_policy: Some(
                if request.local_traffic_only {
                    "Local"
                } else {
                    "Cluster"
                }
                .into(),
            ),
            load_balancer_class: request.load_balancer_class.clone(),
            load_balancer_ip: request.requested_ip.clone(),
            external_ips: (!request.external_ips.is_empty()).then(|| request.external_ips.clone()),
            load_balancer_source_ranges: (!request.source_ranges.is_empty())
                .then(|| request.source_ranges.clone()),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The tenant Service a parent object (Service or ServiceWithHealthchecks) serves, from its
/// annotation.
pub fn tenant_service(parent: &ObjectMeta) -> Option<ServiceKey> {
    let value = parent
        .annotations
        .as_ref()?
        .get(TENANT_SERVICE_ANNOTATION)?;
    let (namespace, name) = value.split_once('/')?;
    Some(ServiceKey {
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// VM label changes for one load balancer: which VMs get the label, which lose it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LabelPlan {
    /// VMs to label.
    pub add: Vec<String>,
    /// VMs to unlabel.
    pub remove: Vec<String>,
}

impl LabelPlan {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }
}

/// From the VMs that carry the label now and the VMs that should, the changes (sorted).
pub fn plan_labels(labelled: &BTreeSet<String>, wanted: &BTreeSet<String>) -> LabelPlan {
    LabelPlan {
        add: wanted.difference(labelled).cloned().collect(),
        remove: labelled.difference(wanted).cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_cloud::load_balancer::ServicePort as Port;

    fn request() -> LoadBalancerRequest {
        LoadBalancerRequest {
            cluster_name: "c".into(),
            service: ServiceRef {
                namespace: "web".into(),
                name: "front".into(),
                uid: "0a1b2c3d-4e5f-6789-abcd-ef0123456789".into(),
            },
            ports: vec![
                Port {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: 80,
                    node_port: 30080,
                },
                Port {
                    name: String::new(),
                    protocol: Protocol::Udp,
                    port: 53,
                    node_port: 30053,
                },
            ],
            annotations: BTreeMap::from([("team".into(), "a".into())]),
            source_ranges: vec![],
            local_traffic_only: true,
            health_check_node_port: Some(32000),
            requested_ip: Some("192.0.2.7".into()),
            external_ips: vec!["192.0.2.8".into()],
            load_balancer_class: Some("cls".into()),
            nodes: vec![],
        }
    }

    #[test]
    fn parent_service_follows_deckhouse_rules() {
        let svc = parent_service(&request(), "proj");
        let name = "a0a1b2c3d4e5f6789abcdef012345678";
        assert_eq!(svc.metadata.name.as_deref(), Some(name));
        assert_eq!(name.len(), 32);
        assert_eq!(svc.metadata.namespace.as_deref(), Some("proj"));
        let annotations = svc.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["team"], "a");
        assert_eq!(annotations[TENANT_SERVICE_ANNOTATION], "web/front");
        let spec = svc.spec.clone().unwrap();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"));
        assert_eq!(spec.load_balancer_class.as_deref(), Some("cls"));
        assert_eq!(spec.load_balancer_ip.as_deref(), Some("192.0.2.7"));
        assert_eq!(spec.external_ips, Some(vec!["192.0.2.8".to_string()]));
        assert_eq!(
            spec.selector.unwrap(),
            BTreeMap::from([(format!("dvp.deckhouse.io/{name}"), "loadbalancer".into())])
        );
        let ports: Vec<(String, String, i32, IntOrString)> = spec
            .ports
            .unwrap()
            .into_iter()
            .map(|p| {
                (
                    p.name.unwrap(),
                    p.protocol.unwrap(),
                    p.port,
                    p.target_port.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ports,
            [
                ("http".into(), "TCP".into(), 80, IntOrString::Int(30080)),
                ("port-1".into(), "UDP".into(), 53, IntOrString::Int(30053)),
            ]
        );
        assert_eq!(
            tenant_service(&svc.metadata),
            Some(ServiceKey {
                namespace: "web".into(),
                name: "front".into()
            })
        );
        let mut cluster = request();
        cluster.local_traffic_only = false;
        cluster.external_ips.clear();
        let spec = parent_service(&cluster, "proj").spec.unwrap();
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(spec.external_ips, None);
    }

    #[test]
    fn labels_follow_the_targets() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        /// Labelled now, wanted, expected additions, expected removals.
        type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let table: &[Case] = &[
            (&[], &["a", "b"], &["a", "b"], &[]),
            (&["a", "b"], &["a", "b"], &[], &[]),
            (&["a", "b"], &["b", "c"], &["c"], &["a"]),
            (&["a"], &[], &[], &["a"]),
        ];
        for (now, want, add, remove) in table {
            let plan = plan_labels(&set(now), &set(want));
            assert_eq!(plan.add, set(add).into_iter().collect::<Vec<_>>());
            assert_eq!(plan.remove, set(remove).into_iter().collect::<Vec<_>>());
        }
        assert!(plan_labels(&set(&["a"]), &set(&["a"])).is_empty());
    }
}
