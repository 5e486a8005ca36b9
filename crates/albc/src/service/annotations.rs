//! Which Services are NLB Services, and their `service.beta.kubernetes.io/aws-load-balancer-*`
//! annotations parsed with every problem listed. The keys the CCM also reads (internal, subnets,
//! private-ipv4-addresses, health checks, additional-resource-tags) go through the AWS
//! provider's own parser; the controller's keys (`type`, `scheme`, `nlb-target-type`) are read
//! here.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use stratus_aws::lb::annotations::{self as shared, HealthCheckPort, HealthCheckProtocol, PREFIX};

use crate::ingress::annotations::HealthCheck;

/// The `loadBalancerClass` this controller serves.
pub const NLB_CLASS: &str = "service.k8s.aws/nlb";
/// `aws-load-balancer-type`.
pub const TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";
/// `aws-load-balancer-scheme`.
pub const SCHEME: &str = "service.beta.kubernetes.io/aws-load-balancer-scheme";
/// `aws-load-balancer-nlb-target-type`.
pub const TARGET_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type";

/// The parsed annotations of an NLB Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlbAnnotations {
    /// `scheme: internet-facing` (the default is internal).
    pub internet_facing: bool,
    /// `nlb-target-type: ip` (the default is instance; legacy `type: nlb-ip` means ip).
    pub ip_targets: bool,
    /// `subnets` (IDs or Name tags); empty: discovered by tags.
    pub subnets: Vec<String>,
    /// `private-ipv4-addresses`, one per subnet.
    pub private_ips: Vec<Ipv4Addr>,
    /// Health check of every target group.
    pub health: HealthCheck,
    /// `additional-resource-tags`.
    pub tags: BTreeMap<String, String>,
    /// `eip-allocations`, one per subnet (internet-facing only).
    pub eip_allocations: Vec<String>,
    /// `target-node-labels`: instance targets only on nodes with these labels.
    pub target_node_labels: BTreeMap<String, String>,
    /// `target-group-attributes` of every target group.
    pub tg_attributes: BTreeMap<String, String>,
}

/// Whether this controller serves the Service: a LoadBalancer with our class, or with no class
/// and the `external` (or legacy `nlb-ip`) type annotation.
pub fn is_nlb_service(svc: &Service) -> bool {
    let Some(spec) = svc.spec.as_ref() else {
        return false;
    };
    if spec.type_.as_deref() != Some("LoadBalancer") {
        return false;
    }
    match spec.load_balancer_class.as_deref() {
        Some(class) => class == NLB_CLASS,
        None => svc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TYPE))
            .is_some_and(|t| t == "external" || t == "nlb-ip"),
    }
}

/// The NLB health-check defaults of upstream: TCP on the traffic port, every 10 s.
pub fn default_health() -> HealthCheck {
    HealthCheck {
        path: "/".into(),
        port: "traffic-port".into(),
        protocol: "TCP".into(),
        interval: 10,
        timeout: 10,
        healthy: 3,
        unhealthy: 3,
        success_codes: "200-399".into(),
    }
}

/// Parses the annotations; `Err` lists every problem.
pub fn parse(annotations: &BTreeMap<String, String>) -> Result<NlbAnnotations, Vec<String>> {
    let mut problems = Vec::new();
    let type_value = annotations.get(TYPE).map(String::as_str);
    let scheme = match annotations.get(SCHEME).map(String::as_str) {
        None => None,
        Some("internal") => Some(false),
        Some("internet-facing") => Some(true),
        Some(other) => {
            problems.push(format!(
                "{SCHEME}: must be internal or internet-facing (value {other:?})"
            ));
            None
        }
    };
    let ip_targets = match annotations.get(TARGET_TYPE).map(String::as_str) {
        None => type_value == Some("nlb-ip"),
        Some("ip") => true,
        Some("instance") => false,
        Some(other) => {
            problems.push(format!(
                "{TARGET_TYPE}: must be ip or instance (value {other:?})"
            ));
            false
        }
    };
    // The shared parser sees the Service as an in-tree NLB without our own keys.
    let mut rest: BTreeMap<String, String> = annotations
        .iter()
        .filter(|(k, _)| {
            k.starts_with(PREFIX) && ![TYPE, SCHEME, TARGET_TYPE].contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    rest.insert(TYPE.to_string(), "nlb".to_string());
    let parsed = match shared::parse(&rest) {
        Ok(p) => Some(p),
        Err(errors) => {
            problems.extend(errors.0.iter().map(ToString::to_string));
            None
        }
    };
    let Some(parsed) = parsed.filter(|_| problems.is_empty()) else {
        return Err(problems);
    };
    let internet_facing = scheme.unwrap_or(false) && !parsed.internal;
    if internet_facing && !parsed.private_ipv4_addresses.is_empty() {
        return Err(vec![format!(
            "{PREFIX}private-ipv4-addresses: only for an internal load balancer"
        )]);
    }
    if !internet_facing && !parsed.eip_allocations.is_empty() {
        return Err(vec![format!(
            "{PREFIX}eip-allocations: only for an internet-facing load balancer"
        )]);
    }
    let mut health = default_health();
    let h = &parsed.health_check;
    if let Some(p) = h.protocol {
        health.protocol = match p {
            HealthCheckProtocol::Tcp => "TCP",
            HealthCheckProtocol::Http => "HTTP",
            HealthCheckProtocol::Https => "HTTPS",
        }
        .into();
    }
    if let Some(HealthCheckPort::Port(n)) = h.port {
        health.port = n.to_string();
    }
    if let Some(p) = &h.path {
        health.path = p.clone();
    }
    let as_i32 = |v: Option<u32>, d: i32| v.and_then(|n| i32::try_from(n).ok()).unwrap_or(d);
    health.healthy = as_i32(h.healthy_threshold, health.healthy);
    health.unhealthy = as_i32(h.unhealthy_threshold, health.unhealthy);
    health.timeout = as_i32(h.timeout_seconds, health.timeout);
    health.interval = as_i32(h.interval_seconds, health.interval);
    Ok(NlbAnnotations {
        internet_facing,
        ip_targets,
        subnets: parsed.subnets,
        private_ips: parsed.private_ipv4_addresses,
        health,
        tags: parsed.additional_tags,
        eip_allocations: parsed.eip_allocations,
        target_node_labels: parsed.target_node_labels,
        tg_attributes: parsed
            .target_group_attributes
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_internal_instance_tcp() {
        let a = parse(&map(&[("type", "external")])).unwrap();
        assert!(!a.internet_facing && !a.ip_targets);
        assert_eq!(a.health, default_health());
    }

    #[test]
    fn upstream_keys_are_read() {
        let a = parse(&map(&[
            ("type", "external"),
            ("scheme", "internal"),
            ("nlb-target-type", "ip"),
            ("subnets", "subnet-1,subnet-2"),
            ("private-ipv4-addresses", "10.0.0.5,10.0.16.5"),
            ("healthcheck-protocol", "http"),
            ("healthcheck-path", "/healthz"),
            ("additional-resource-tags", "team=a"),
        ]))
        .unwrap();
        assert!(a.ip_targets);
        assert_eq!(a.subnets, vec!["subnet-1", "subnet-2"]);
        assert_eq!(a.private_ips.len(), 2);
        assert_eq!(
            (a.health.protocol.as_str(), a.health.path.as_str()),
            ("HTTP", "/healthz")
        );
        assert_eq!(a.tags.get("team").map(String::as_str), Some("a"));
        assert!(parse(&map(&[("type", "nlb-ip")])).unwrap().ip_targets);
        assert!(
            parse(&map(&[("scheme", "internet-facing")]))
                .unwrap()
                .internet_facing
        );
    }

    #[test]
    fn every_problem_is_listed() {
        let e = parse(&map(&[
            ("scheme", "public"),
            ("nlb-target-type", "pod"),
            ("private-ipv4-addresses", "ten"),
        ]))
        .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        let e = parse(&map(&[
            ("scheme", "internet-facing"),
            ("private-ipv4-addresses", "10.0.0.5"),
        ]))
        .unwrap_err();
        assert!(e[0].contains("internal"), "{e:?}");
    }

    fn svc(class: Option<&str>, ty: Option<&str>, kind: &str) -> Service {
        let mut ann = serde_json::Map::new();
        if let Some(t) = ty {
            ann.insert(TYPE.into(), t.into());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s", "annotations": ann},
            "spec": {"type": kind, "loadBalancerClass": class}}))
        .unwrap()
    }

    #[test]
    fn which_services_are_ours() {
        assert!(is_nlb_service(&svc(Some(NLB_CLASS), None, "LoadBalancer")));
        assert!(is_nlb_service(&svc(None, Some("external"), "LoadBalancer")));
        assert!(is_nlb_service(&svc(None, Some("nlb-ip"), "LoadBalancer")));
        assert!(!is_nlb_service(&svc(None, Some("nlb"), "LoadBalancer")));
        assert!(!is_nlb_service(&svc(None, None, "LoadBalancer")));
        assert!(!is_nlb_service(&svc(
            Some("other"),
            Some("external"),
            "LoadBalancer"
        )));
        assert!(!is_nlb_service(&svc(Some(NLB_CLASS), None, "ClusterIP")));
    }
}
