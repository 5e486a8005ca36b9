//! The desired shape of a Classic ELB, computed from a Service request and its annotations.
//! Pure: the I/O side compares this with what AWS reports and changes only the difference.

use std::collections::{BTreeMap, BTreeSet};

use stratus_cloud::{LoadBalancerRequest, Protocol};

use stratus_aws_api::annotations::{
    BackendProtocol, HealthCheckPort, HealthCheckProtocol, LbAnnotations,
};
use stratus_aws_api::tags::ownership_tags;

pub use stratus_aws_api::elb::{
    AccessLogSettings, ClassicAttributes, ClassicListener, HealthCheck, PROXY_PROTOCOL_POLICY,
};

/// Upstream defaults of a Classic ELB health check.
pub const DEFAULT_HEALTHY_THRESHOLD: i32 = 2;
/// Upstream's unhealthy threshold.
pub const DEFAULT_UNHEALTHY_THRESHOLD: i32 = 6;
/// Upstream's health-check timeout (seconds).
pub const DEFAULT_HC_TIMEOUT: i32 = 5;
/// Upstream's health-check interval (seconds).
pub const DEFAULT_HC_INTERVAL: i32 = 10;
/// AWS default idle timeout of a Classic ELB.
pub const DEFAULT_IDLE_TIMEOUT: i32 = 60;
/// The attributes AWS gives a new Classic ELB made through the API.
pub fn default_attributes() -> ClassicAttributes {
    ClassicAttributes {
        cross_zone: false,
        draining: None,
        idle_timeout: DEFAULT_IDLE_TIMEOUT,
        access_log: None,
    }
}

/// Everything a Classic ELB should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicSpec {
    /// The ELB name.
    pub name: String,
    /// Internal scheme.
    pub internal: bool,
    /// The listeners.
    pub listeners: BTreeSet<ClassicListener>,
    /// The health check.
    pub health_check: HealthCheck,
    /// The attributes.
    pub attributes: ClassicAttributes,
    /// Instance ports that must speak the PROXY protocol.
    pub proxy_ports: BTreeSet<i32>,
    /// Predefined SSL negotiation policy for the TLS listeners (`ssl-negotiation-policy`).
    pub ssl_policy: Option<String>,
    /// The tags (ownership plus the user's).
    pub tags: BTreeMap<String, String>,
}

/// Name of the listener policy that references a predefined SSL negotiation policy.
pub fn ssl_policy_name(predefined: &str) -> String {
    format!("k8s-SSLNegotiationPolicy-{predefined}")
}

fn backend_name(p: BackendProtocol) -> &'static str {
    match p {
        BackendProtocol::Http => "HTTP",
        BackendProtocol::Https => "HTTPS",
        BackendProtocol::Ssl => "SSL",
        BackendProtocol::Tcp => "TCP",
    }
}

/// Front-end protocol of a TLS listener for a given backend protocol (upstream mapping).
fn tls_frontend(backend: BackendProtocol) -> &'static str {
    match backend {
        BackendProtocol::Http | BackendProtocol::Https => "HTTPS",
        BackendProtocol::Ssl | BackendProtocol::Tcp => "SSL",
    }
}

/// Most listeners of one Classic ELB: the "listeners per load balancer" quota of Elastic Load
/// Balancing (100). One listener per Service port, so a Service with more ports is refused
/// before any AWS call.
pub const MAX_CLASSIC_LISTENERS: usize = 100;

/// The desired Classic ELB, or why the Service cannot have one.
pub fn classic_spec(
    request: &LoadBalancerRequest,
    ann: &LbAnnotations,
    cluster_id: &str,
) -> Result<ClassicSpec, String> {
    if request.requested_ip.is_some() {
        return Err("spec.loadBalancerIP cannot be set for an AWS load balancer".into());
    }
    if request.ports.is_empty() {
        return Err("the Service has no ports".into());
    }
    if request.ports.len() > MAX_CLASSIC_LISTENERS {
        return Err(format!(
            "the Service has {} ports, but a Classic ELB has at most {MAX_CLASSIC_LISTENERS} listeners",
            request.ports.len()
        ));
    }
    if let Some(p) = request.ports.iter().find(|p| p.protocol != Protocol::Tcp) {
        return Err(format!(
            "port {} is {:?}: a Classic ELB supports only TCP (use type nlb for UDP)",
            p.port, p.protocol
        ));
    }
    let mut listeners = BTreeSet::new();
    for p in &request.ports {
        let ssl = ann
            .ssl
            .as_ref()
            .filter(|s| s.ports.matches(p.port, Some(p.name.as_str())));
        let (protocol, instance_protocol, certificate) = match (ssl, ann.backend_protocol) {
            (Some(s), None) => ("SSL", "TCP", Some(s.certificate_arn.clone())),
            (Some(s), Some(b)) => (
                tls_frontend(b),
                backend_name(b),
                Some(s.certificate_arn.clone()),
            ),
            (None, Some(BackendProtocol::Http)) => ("HTTP", "HTTP", None),
            (None, _) => ("TCP", "TCP", None),
        };
        listeners.insert(ClassicListener {
            port: i32::from(p.port),
            protocol: protocol.into(),
            instance_port: i32::from(p.node_port),
            instance_protocol: instance_protocol.into(),
            certificate,
        });
    }
    let hc = &ann.health_check;
    let (default_proto, default_port, default_path) =
        match (request.local_traffic_only, request.health_check_node_port) {
            (true, Some(port)) => ("HTTP", port, "/healthz".to_string()),
            _ => ("TCP", request.ports[0].node_port, String::new()),
        };
    let proto = match hc.protocol {
        Some(HealthCheckProtocol::Tcp) => "TCP",
        Some(HealthCheckProtocol::Http) => "HTTP",
        Some(HealthCheckProtocol::Https) => "HTTPS",
        None => default_proto,
    };
    let port = match hc.port {
        Some(HealthCheckPort::Port(n)) => n,
        Some(HealthCheckPort::TrafficPort) => request.ports[0].node_port,
        None => default_port,
    };
    let target = if proto == "TCP" {
        format!("TCP:{port}")
    } else {
        let path = hc.path.clone().unwrap_or(if default_path.is_empty() {
            "/".into()
        } else {
            default_path
        });
        format!("{proto}:{port}{path}")
    };
    let health_check = HealthCheck {
        target,
        healthy_threshold: hc
            .healthy_threshold
            .map_or(DEFAULT_HEALTHY_THRESHOLD, |v| v as i32),
        unhealthy_threshold: hc
            .unhealthy_threshold
            .map_or(DEFAULT_UNHEALTHY_THRESHOLD, |v| v as i32),
        timeout: hc.timeout_seconds.map_or(DEFAULT_HC_TIMEOUT, |v| v as i32),
        interval: hc
            .interval_seconds
            .map_or(DEFAULT_HC_INTERVAL, |v| v as i32),
    };
    let attributes = ClassicAttributes {
        cross_zone: ann.cross_zone.unwrap_or(false),
        draining: ann.connection_draining.map(|t| t as i32),
        idle_timeout: ann.idle_timeout.map_or(DEFAULT_IDLE_TIMEOUT, |t| t as i32),
        access_log: ann
            .access_log
            .as_ref()
            .filter(|a| a.enabled)
            .map(|a| AccessLogSettings {
                interval: a.emit_interval_minutes.unwrap_or(60) as i32,
                bucket: a.s3_bucket_name.clone().unwrap_or_default(),
                prefix: a.s3_bucket_prefix.clone().unwrap_or_default(),
            }),
    };
    let proxy_ports = if ann.proxy_protocol {
        listeners.iter().map(|l| l.instance_port).collect()
    } else {
        BTreeSet::new()
    };
    Ok(ClassicSpec {
        name: request.service.default_load_balancer_name(),
        internal: ann.internal,
        listeners,
        health_check,
        attributes,
        proxy_ports,
        ssl_policy: ann.ssl.as_ref().and_then(|s| s.negotiation_policy.clone()),
        tags: ownership_tags(cluster_id, &request.service, &ann.additional_tags),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::annotations::{self, PREFIX};
    use stratus_cloud::{ServicePort, ServiceRef};

    fn request(ports: &[(u16, u16)]) -> LoadBalancerRequest {
        LoadBalancerRequest {
            cluster_name: "kubernetes".into(),
            service: ServiceRef {
                namespace: "shop".into(),
                name: "web".into(),
                uid: "11111111-2222-3333-4444-555555555555".into(),
            },
            ports: ports
                .iter()
                .map(|(p, np)| ServicePort {
                    name: format!("p{p}"),
                    protocol: Protocol::Tcp,
                    port: *p,
                    node_port: *np,
                })
                .collect(),
            annotations: BTreeMap::new(),
            source_ranges: vec![],
            local_traffic_only: false,
            health_check_node_port: None,
            requested_ip: None,
            external_ips: Vec::new(),
            load_balancer_class: None,
            nodes: vec![],
        }
    }

    fn spec(req: &LoadBalancerRequest, pairs: &[(&str, &str)]) -> Result<ClassicSpec, String> {
        let map = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect();
        classic_spec(req, &annotations::parse(&map).unwrap(), "c1")
    }

    #[test]
    fn plain_tcp_defaults() {
        let s = spec(&request(&[(80, 30080)]), &[]).unwrap();
        assert_eq!(s.name, "a11111111222233334444555555555555"[..32]);
        let l = s.listeners.iter().next().unwrap();
        assert_eq!(
            (l.protocol.as_str(), l.instance_protocol.as_str()),
            ("TCP", "TCP")
        );
        assert_eq!(s.health_check.target, "TCP:30080");
        assert_eq!(
            (
                s.health_check.healthy_threshold,
                s.health_check.unhealthy_threshold
            ),
            (2, 6)
        );
        assert_eq!(s.attributes.draining, None);
        assert_eq!(s.tags.get("kubernetes.io/cluster/c1").unwrap(), "owned");
        assert_eq!(
            s.tags.get("kubernetes.io/service-name").unwrap(),
            "shop/web"
        );
    }

    #[test]
    fn tls_listeners_follow_the_upstream_mapping() {
        let req = request(&[(443, 30443), (80, 30080)]);
        let s = spec(
            &req,
            &[
                ("ssl-cert", "arn:aws:acm:x"),
                ("ssl-ports", "443"),
                ("backend-protocol", "http"),
            ],
        )
        .unwrap();
        let by_port: BTreeMap<i32, &ClassicListener> =
            s.listeners.iter().map(|l| (l.port, l)).collect();
        assert_eq!(by_port[&443].protocol, "HTTPS");
        assert_eq!(by_port[&443].instance_protocol, "HTTP");
        assert_eq!(by_port[&443].certificate.as_deref(), Some("arn:aws:acm:x"));
        assert_eq!(by_port[&80].protocol, "HTTP");
        assert_eq!(by_port[&80].certificate, None);
        let s = spec(&req, &[("ssl-cert", "arn:aws:acm:x")]).unwrap();
        assert!(s
            .listeners
            .iter()
            .all(|l| l.protocol == "SSL" && l.instance_protocol == "TCP"));
    }

    #[test]
    fn local_traffic_checks_the_health_node_port() {
        let mut req = request(&[(80, 30080)]);
        req.local_traffic_only = true;
        req.health_check_node_port = Some(32000);
        let s = spec(&req, &[]).unwrap();
        assert_eq!(s.health_check.target, "HTTP:32000/healthz");
        let s = spec(
            &req,
            &[
                ("healthcheck-protocol", "TCP"),
                ("healthcheck-port", "traffic-port"),
            ],
        )
        .unwrap();
        assert_eq!(s.health_check.target, "TCP:30080");
    }

    #[test]
    fn attributes_and_proxy_protocol() {
        let s = spec(
            &request(&[(80, 30080)]),
            &[
                ("cross-zone-load-balancing-enabled", "true"),
                ("connection-draining-enabled", "true"),
                ("connection-draining-timeout", "30"),
                ("connection-idle-timeout", "120"),
                ("proxy-protocol", "*"),
            ],
        )
        .unwrap();
        assert!(s.attributes.cross_zone);
        assert_eq!(s.attributes.draining, Some(30));
        assert_eq!(s.attributes.idle_timeout, 120);
        assert_eq!(s.proxy_ports, [30080].into());
    }

    #[test]
    fn refuses_what_a_classic_elb_cannot_do() {
        let mut req = request(&[(80, 30080)]);
        req.ports[0].protocol = Protocol::Udp;
        assert!(spec(&req, &[]).unwrap_err().contains("only TCP"));
        let mut req = request(&[(80, 30080)]);
        req.requested_ip = Some("1.2.3.4".into());
        assert!(spec(&req, &[]).unwrap_err().contains("loadBalancerIP"));
    }

    #[test]
    fn refuses_more_ports_than_listeners() {
        let ports: Vec<(u16, u16)> = (1..=101).map(|p| (p, 30000 + p)).collect();
        let e = spec(&request(&ports), &[]).unwrap_err();
        assert!(
            e.contains("101 ports") && e.contains("at most 100 listeners"),
            "{e}"
        );
        assert!(spec(&request(&ports[..MAX_CLASSIC_LISTENERS]), &[]).is_ok());
    }
}
