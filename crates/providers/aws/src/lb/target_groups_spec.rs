//! The desired target groups of a Service of `type: none` (Deckhouse's patch to upstream): no
//! load balancer, one instance target group per Service port for a load balancer made
//! elsewhere, and the status that says so. Pure.

use std::collections::BTreeMap;

use stratus_cloud::{Ingress, LoadBalancerRequest};

use stratus_aws_api::annotations::{BackendProtocol, LbAnnotations};
use stratus_aws_api::tags::ownership_tags;

use crate::lb::network_spec::{
    TargetHealthCheck, DEFAULT_HC_INTERVAL, DEFAULT_HC_THRESHOLD, LOAD_BALANCER_TAG,
};

/// kube-proxy's health port, which the target groups check when traffic may go to any node.
pub const PROXY_HEALTHZ_PORT: &str = "10256";

/// The path of kube-proxy's and the health-check node port's answers.
pub const HEALTHZ_PATH: &str = "/healthz";

/// Timeout of the HTTP health checks (seconds): AWS's default for HTTP checks, below the
/// 10-second interval as AWS requires of HTTP and HTTPS target groups.
pub const HTTP_HC_TIMEOUT: i32 = 6;

/// Most characters of a target-group name.
const MAX_NAME: usize = 32;

/// One target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortGroup {
    /// Its name: the load-balancer name cut to fit, `-`, the port's index.
    pub name: String,
    /// Traffic protocol: `TCP`, `TLS`, `HTTP` or `HTTPS`.
    pub protocol: &'static str,
    /// The node port targets listen on.
    pub node_port: i32,
}

/// Everything a `type: none` Service should have in AWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupsSpec {
    /// The load-balancer name the groups are named after (none is made).
    pub name: String,
    /// One group per Service port, in port order.
    pub groups: Vec<PortGroup>,
    /// Their health check.
    pub health_check: TargetHealthCheck,
    /// Their tags: ownership, the user's, and the load-balancer name (for the reaper).
    pub tags: BTreeMap<String, String>,
}

/// The name of port `index`'s group: as Deckhouse's patch, the load-balancer name cut to
/// `32 - 1 - len(index)` characters, a hyphen, the index.
pub fn group_name(lb_name: &str, index: usize) -> String {
    let suffix = index.to_string();
    let keep = MAX_NAME - 1 - suffix.len();
    let prefix: String = lb_name.chars().take(keep).collect();
    format!("{prefix}-{suffix}")
}

/// The status of a `type: none` Service, as Deckhouse's patch writes it: IP `0.0.0.0` and
/// hostname `none` (a marker, not an address anyone connects to).
pub fn none_ingress() -> Ingress {
    Ingress {
        hostname: Some("none".into()),
        ip: Some("0.0.0.0".into()),
    }
}

/// The traffic protocol of the groups: TCP, or the backend-protocol annotation's.
fn traffic_protocol(ann: &LbAnnotations) -> &'static str {
    match ann.backend_protocol {
        None | Some(BackendProtocol::Tcp) => "TCP",
        Some(BackendProtocol::Ssl) => "TLS",
        Some(BackendProtocol::Http) => "HTTP",
        Some(BackendProtocol::Https) => "HTTPS",
    }
}

/// The desired target groups, or why the Service cannot have them.
pub fn target_groups_spec(
    request: &LoadBalancerRequest,
    ann: &LbAnnotations,
    cluster_id: &str,
) -> Result<TargetGroupsSpec, String> {
    if request.ports.is_empty() {
        return Err("the Service has no ports".into());
    }
    let name = request.service.default_load_balancer_name();
    let protocol = traffic_protocol(ann);
    let groups = request
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| PortGroup {
            name: group_name(&name, i),
            protocol,
            node_port: i32::from(p.node_port),
        })
        .collect();
    // kube-proxy's health port, or the health-check node port of an externalTrafficPolicy:
    // Local Service (only nodes with a ready endpoint answer it).
    let port = match request.health_check_node_port {
        Some(n) if request.local_traffic_only => n.to_string(),
        _ => PROXY_HEALTHZ_PORT.to_string(),
    };
    let hc = &ann.health_check;
    let health_check = TargetHealthCheck {
        protocol: "HTTP".into(),
        port,
        path: Some(HEALTHZ_PATH.into()),
        interval: hc
            .interval_seconds
            .map_or(DEFAULT_HC_INTERVAL, |v| v as i32),
        timeout: hc.timeout_seconds.map_or(HTTP_HC_TIMEOUT, |v| v as i32),
        healthy_threshold: hc
            .healthy_threshold
            .map_or(DEFAULT_HC_THRESHOLD, |v| v as i32),
        unhealthy_threshold: hc
            .unhealthy_threshold
            .map_or(DEFAULT_HC_THRESHOLD, |v| v as i32),
    };
    let mut tags = ownership_tags(cluster_id, &request.service, &ann.additional_tags);
    tags.insert(LOAD_BALANCER_TAG.into(), name.clone());
    Ok(TargetGroupsSpec {
        name,
        groups,
        health_check,
        tags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::annotations::parse;
    use stratus_cloud::{Protocol, ServicePort, ServiceRef};

    fn request(annotations: &[(&str, &str)], ports: usize) -> LoadBalancerRequest {
        LoadBalancerRequest {
            cluster_name: "kubernetes".into(),
            service: ServiceRef {
                namespace: "web".into(),
                name: "front".into(),
                uid: "0c7a52e1-3b4f-4c1d-9a40-7d2a6b1f2e11".into(),
            },
            ports: (0..ports)
                .map(|i| ServicePort {
                    name: format!("p{i}"),
                    protocol: Protocol::Tcp,
                    port: 80 + i as u16,
                    node_port: 30080 + i as u16,
                })
                .collect(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (format!("service.beta.kubernetes.io/{k}"), v.to_string()))
                .collect(),
            source_ranges: Vec::new(),
            local_traffic_only: false,
            health_check_node_port: None,
            requested_ip: None,
            external_ips: Vec::new(),
            load_balancer_class: None,
            nodes: Vec::new(),
        }
    }

    fn spec(r: &LoadBalancerRequest) -> TargetGroupsSpec {
        let ann = parse(&r.annotations).unwrap();
        target_groups_spec(r, &ann, "c1").unwrap()
    }

    #[test]
    fn names_cut_the_load_balancer_name_to_32_characters() {
        let lb = "a0c7a52e13b4f4c1d9a407d2a6b1f2e1";
        assert_eq!(lb.len(), 32);
        assert_eq!(group_name(lb, 0), "a0c7a52e13b4f4c1d9a407d2a6b1f2-0");
        assert_eq!(group_name(lb, 12), "a0c7a52e13b4f4c1d9a407d2a6b1f-12");
        assert!((0..200).all(|i| group_name(lb, i).len() == 32));
    }

    #[test]
    fn one_tcp_group_per_port_checking_kube_proxy() {
        let r = request(&[("aws-load-balancer-type", "none")], 2);
        let s = spec(&r);
        assert_eq!(s.name, "a0c7a52e13b4f4c1d9a407d2a6b1f2e1");
        let got: Vec<(&str, &str, i32)> = s
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.protocol, g.node_port))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a0c7a52e13b4f4c1d9a407d2a6b1f2-0", "TCP", 30080),
                ("a0c7a52e13b4f4c1d9a407d2a6b1f2-1", "TCP", 30081)
            ]
        );
        assert_eq!(
            (
                s.health_check.protocol.as_str(),
                s.health_check.port.as_str()
            ),
            ("HTTP", "10256")
        );
        assert_eq!(s.health_check.path.as_deref(), Some("/healthz"));
        assert_eq!((s.health_check.interval, s.health_check.timeout), (10, 6));
        assert_eq!(s.tags[LOAD_BALANCER_TAG], s.name);
        assert_eq!(s.tags["kubernetes.io/service-name"], "web/front");
        assert_eq!(s.tags["kubernetes.io/cluster/c1"], "owned");
    }

    #[test]
    fn local_traffic_checks_the_health_check_node_port() {
        let mut r = request(&[("aws-load-balancer-type", "none")], 1);
        r.local_traffic_only = true;
        r.health_check_node_port = Some(31999);
        let s = spec(&r);
        assert_eq!(s.health_check.port, "31999");
        assert_eq!(s.health_check.path.as_deref(), Some("/healthz"));
    }

    #[test]
    fn backend_protocol_table() {
        for (value, want) in [
            ("tcp", "TCP"),
            ("tls", "TLS"),
            ("ssl", "TLS"),
            ("http", "HTTP"),
            ("https", "HTTPS"),
        ] {
            let r = request(
                &[
                    ("aws-load-balancer-type", "none"),
                    ("aws-load-balancer-backend-protocol", value),
                ],
                1,
            );
            assert_eq!(spec(&r).groups[0].protocol, want, "{value}");
        }
        let r = request(
            &[
                ("aws-load-balancer-type", "none"),
                ("aws-load-balancer-backend-protocol", "udp"),
            ],
            1,
        );
        assert!(
            parse(&r.annotations).is_err(),
            "an unknown protocol is refused"
        );
        // `tls` stays a target-group word: a Classic ELB refuses it as before.
        let r = request(&[("aws-load-balancer-backend-protocol", "tls")], 1);
        assert!(parse(&r.annotations).is_err());
    }

    #[test]
    fn the_status_is_deckhouses_marker() {
        let i = none_ingress();
        assert_eq!(
            (i.ip.as_deref(), i.hostname.as_deref()),
            (Some("0.0.0.0"), Some("none"))
        );
    }
}
