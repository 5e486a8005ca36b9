//! Which Services are NLB Services, and their `service.beta.kubernetes.io/aws-load-balancer-*`
//! annotations parsed with every problem listed. The keys the CCM also reads (internal, subnets,
//! private-ipv4-addresses, health checks, additional-resource-tags, ssl-cert, ssl-ports,
//! ssl-negotiation-policy, backend-protocol, proxy-protocol, cross-zone) go through the AWS
//! provider's own parser; the controller's own keys (`type`, `scheme`, `nlb-target-type`,
//! `attributes`, `alpn-policy`) are read here.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use stratus_aws_api::annotations::{
    self as shared, BackendProtocol, HealthCheckPort, HealthCheckProtocol, SslPorts, PREFIX,
};

use crate::ingress::annotations::{pairs, HealthCheck};

/// The `loadBalancerClass` this controller serves.
pub const NLB_CLASS: &str = "service.k8s.aws/nlb";
/// `aws-load-balancer-type`.
pub const TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-type";
/// `aws-load-balancer-scheme`.
pub const SCHEME: &str = "service.beta.kubernetes.io/aws-load-balancer-scheme";
/// `aws-load-balancer-nlb-target-type`.
pub const TARGET_TYPE: &str = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type";
/// `aws-load-balancer-attributes`: load-balancer attributes, `key=value,...`.
pub const ATTRIBUTES: &str = "service.beta.kubernetes.io/aws-load-balancer-attributes";
/// `aws-load-balancer-manage-backend-security-group-rules`: with given `security-groups`, the
/// shared backend group is attached too and the targets' rules managed.
pub const MANAGE_BACKEND_RULES: &str =
    "service.beta.kubernetes.io/aws-load-balancer-manage-backend-security-group-rules";
/// The Service's source ranges when `spec.loadBalancerSourceRanges` is empty.
pub const SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
/// `aws-load-balancer-alpn-policy` of the TLS listeners.
pub const ALPN_POLICY: &str = "service.beta.kubernetes.io/aws-load-balancer-alpn-policy";
/// The security policy of a TLS listener when `ssl-negotiation-policy` is not set (upstream's).
pub const DEFAULT_SSL_POLICY: &str = "ELBSecurityPolicy-2016-08";
/// The ALPN policies ELBv2 accepts.
pub const ALPN_POLICIES: &[&str] = &[
    "HTTP1Only",
    "HTTP2Only",
    "HTTP2Optional",
    "HTTP2Preferred",
    "None",
];
/// The attribute `cross-zone-load-balancing-enabled` (and `attributes`) set.
pub const CROSS_ZONE_ATTRIBUTE: &str = "load_balancing.cross_zone.enabled";
/// The target-group attribute `proxy-protocol: "*"` sets.
pub const PROXY_PROTOCOL_ATTRIBUTE: &str = "proxy_protocol_v2.enabled";

/// TLS termination of an NLB's TCP listeners (`ssl-cert` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlbTls {
    /// `ssl-cert`: the first is the listener's default certificate, the others are added.
    pub certificates: Vec<String>,
    /// `ssl-ports` (default: every TCP port).
    pub ports: SslPorts,
    /// `ssl-negotiation-policy`, or [`DEFAULT_SSL_POLICY`].
    pub ssl_policy: String,
    /// `alpn-policy`.
    pub alpn: Option<String>,
    /// `backend-protocol: ssl`: the target groups speak TLS too.
    pub backend_tls: bool,
}

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
    /// `target-group-attributes` of every target group (with `proxy-protocol`'s).
    pub tg_attributes: BTreeMap<String, String>,
    /// TLS listeners, when `ssl-cert` is set.
    pub tls: Option<NlbTls>,
    /// `attributes` (and `cross-zone-load-balancing-enabled`) of the load balancer.
    pub lb_attributes: BTreeMap<String, String>,
    /// `security-groups`: the frontend groups (none: a managed one).
    pub security_groups: Vec<String>,
    /// `manage-backend-security-group-rules`.
    pub manage_backend_rules: bool,
}

/// Whether this controller serves the Service: a LoadBalancer with our class (`class`, by
/// default [`NLB_CLASS`]), or with no class and the `external` (or legacy `nlb-ip`) type
/// annotation.
pub fn is_nlb_service(svc: &Service, class: &str) -> bool {
    let Some(spec) = svc.spec.as_ref() else {
        return false;
    };
    if spec.type_.as_deref() != Some("LoadBalancer") {
        return false;
    }
    match spec.load_balancer_class.as_deref() {
        Some(c) => c == class,
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
    let mut lb_attributes = BTreeMap::new();
    if let Some(v) = annotations.get(ATTRIBUTES) {
        pairs(&mut problems, ATTRIBUTES, v, &mut lb_attributes);
    }
    let manage_backend_rules = match annotations.get(MANAGE_BACKEND_RULES).map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            problems.push(format!(
                "{MANAGE_BACKEND_RULES}: true or false (value {other:?})"
            ));
            false
        }
    };
    let alpn = annotations.get(ALPN_POLICY).cloned();
    if let Some(v) = alpn
        .as_ref()
        .filter(|v| !ALPN_POLICIES.contains(&v.as_str()))
    {
        problems.push(format!(
            "{ALPN_POLICY}: must be one of {} (value {v:?})",
            ALPN_POLICIES.join(", ")
        ));
    }
    // The shared parser sees the Service as an in-tree NLB without our own keys.
    let ours = [
        TYPE,
        SCHEME,
        TARGET_TYPE,
        ATTRIBUTES,
        ALPN_POLICY,
        MANAGE_BACKEND_RULES,
    ];
    let mut rest: BTreeMap<String, String> = annotations
        .iter()
        .filter(|(k, _)| k.starts_with(PREFIX) && !ours.contains(&k.as_str()))
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
    let tls = parsed
        .as_ref()
        .and_then(|p| p.ssl.as_ref())
        .map(|ssl| NlbTls {
            certificates: ssl
                .certificate_arn
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
            ports: ssl.ports.clone(),
            ssl_policy: ssl
                .negotiation_policy
                .clone()
                .unwrap_or_else(|| DEFAULT_SSL_POLICY.to_string()),
            alpn: alpn.clone(),
            backend_tls: parsed.as_ref().and_then(|p| p.backend_protocol)
                == Some(BackendProtocol::Ssl),
        });
    if let Some(bad) = tls
        .iter()
        .flat_map(|t| &t.certificates)
        .find(|c| !c.starts_with("arn:"))
    {
        problems.push(format!(
            "{PREFIX}ssl-cert: {bad:?} is not a certificate ARN (arn:…)"
        ));
    }
    if tls.is_none() && alpn.is_some() {
        problems.push(format!(
            "{ALPN_POLICY}: needs {PREFIX}ssl-cert (TLS listeners)"
        ));
    }
    let Some(parsed) = parsed.filter(|_| problems.is_empty()) else {
        return Err(problems);
    };
    if let Some(on) = parsed.cross_zone {
        lb_attributes
            .entry(CROSS_ZONE_ATTRIBUTE.to_string())
            .or_insert_with(|| on.to_string());
    }
    let mut tg_attributes: BTreeMap<String, String> = parsed
        .target_group_attributes
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    if parsed.proxy_protocol {
        tg_attributes
            .entry(PROXY_PROTOCOL_ATTRIBUTE.to_string())
            .or_insert_with(|| "true".to_string());
    }
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
        tg_attributes,
        tls,
        lb_attributes,
        security_groups: parsed.security_groups,
        manage_backend_rules,
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
        assert!(a.security_groups.is_empty() && !a.manage_backend_rules);
        let given = parse(&map(&[
            ("security-groups", "sg-1,sg-2"),
            ("manage-backend-security-group-rules", "true"),
        ]))
        .unwrap();
        assert_eq!(given.security_groups, vec!["sg-1", "sg-2"]);
        assert!(given.manage_backend_rules);
        assert!(parse(&map(&[("manage-backend-security-group-rules", "yes")])).is_err());
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

    #[test]
    fn tls_alpn_attributes_and_proxy_protocol() {
        let a = parse(&map(&[
            ("type", "external"),
            (
                "ssl-cert",
                "arn:aws:acm:us-east-1:1:certificate/a,arn:aws:acm:us-east-1:1:certificate/b",
            ),
            ("ssl-ports", "https,8443"),
            ("alpn-policy", "HTTP2Preferred"),
            ("backend-protocol", "ssl"),
            (
                "attributes",
                "deletion_protection.enabled=true,load_balancing.cross_zone.enabled=false",
            ),
            ("cross-zone-load-balancing-enabled", "true"),
            ("proxy-protocol", "*"),
        ]))
        .unwrap();
        let tls = a.tls.unwrap();
        assert_eq!(tls.certificates.len(), 2);
        assert_eq!(tls.ssl_policy, DEFAULT_SSL_POLICY);
        assert_eq!(tls.alpn.as_deref(), Some("HTTP2Preferred"));
        assert!(tls.backend_tls);
        assert!(tls.ports.matches(443, Some("https")) && tls.ports.matches(8443, None));
        assert!(!tls.ports.matches(80, Some("http")));
        // `attributes` wins over the legacy cross-zone key.
        assert_eq!(
            a.lb_attributes
                .get(CROSS_ZONE_ATTRIBUTE)
                .map(String::as_str),
            Some("false")
        );
        assert_eq!(a.lb_attributes.len(), 2);
        assert_eq!(
            a.tg_attributes
                .get(PROXY_PROTOCOL_ATTRIBUTE)
                .map(String::as_str),
            Some("true")
        );
        let policy = parse(&map(&[
            ("ssl-cert", "arn:aws:acm:x"),
            (
                "ssl-negotiation-policy",
                "ELBSecurityPolicy-TLS13-1-2-2021-06",
            ),
        ]))
        .unwrap();
        assert_eq!(
            policy.tls.unwrap().ssl_policy,
            "ELBSecurityPolicy-TLS13-1-2-2021-06"
        );
    }

    #[test]
    fn bad_tls_and_attribute_values_are_problems() {
        let e = parse(&map(&[
            ("alpn-policy", "HTTP3"),
            ("attributes", "deletion_protection.enabled"),
        ]))
        .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e.iter().any(|p| p.contains("needs")), "{e:?}");
        let e = parse(&map(&[("ssl-cert", "arn:aws:acm:x,cert-b")])).unwrap_err();
        assert!(e[0].contains("cert-b"), "{e:?}");
    }

    fn is_nlb_service_default(s: &Service) -> bool {
        is_nlb_service(s, NLB_CLASS)
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
        assert!(is_nlb_service_default(&svc(
            Some(NLB_CLASS),
            None,
            "LoadBalancer"
        )));
        assert!(is_nlb_service_default(&svc(
            None,
            Some("external"),
            "LoadBalancer"
        )));
        assert!(is_nlb_service_default(&svc(
            None,
            Some("nlb-ip"),
            "LoadBalancer"
        )));
        assert!(!is_nlb_service_default(&svc(
            None,
            Some("nlb"),
            "LoadBalancer"
        )));
        assert!(!is_nlb_service_default(&svc(None, None, "LoadBalancer")));
        assert!(!is_nlb_service_default(&svc(
            Some("other"),
            Some("external"),
            "LoadBalancer"
        )));
        assert!(!is_nlb_service_default(&svc(
            Some(NLB_CLASS),
            None,
            "ClusterIP"
        )));
    }
}
