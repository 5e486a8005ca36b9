//! How the NLB plan reads and writes through the shared ELBv2 client: a planned port as listener
//! settings, the planned health check as AWS settings, and AWS's listeners and health checks
//! read back with AWS's defaults.

use aws_sdk_elasticloadbalancingv2::types::ProtocolEnum;
use stratus_aws_api::elbv2::{
    DefaultAction, HealthCheck, HealthCheckSettings, Listener, ListenerSettings,
};

use crate::lb::network_spec::{NetworkPort, TargetHealthCheck};

/// CreateListener for a planned port: its protocol, certificate and policy, forwarding to `tg`.
pub(super) fn new_listener(port: &NetworkPort, tg: &str) -> ListenerSettings {
    ListenerSettings {
        port: Some(port.port),
        protocol: Some(ProtocolEnum::from(port.protocol.as_str())),
        certificate: port.certificate.clone(),
        ssl_policy: port.ssl_policy.clone(),
        alpn_policy: None,
        default_action: DefaultAction::Forward(tg.to_string()),
    }
}

/// ModifyListener re-pointing a listener: protocol, certificate and target group.
pub(super) fn repointed_listener(port: &NetworkPort, tg: &str) -> ListenerSettings {
    ListenerSettings {
        port: None,
        ssl_policy: None,
        ..new_listener(port, tg)
    }
}

/// Whether a live listener forwards to `tg` with the planned protocol and certificate.
pub(super) fn listener_matches(l: &Listener, port: &NetworkPort, tg: &str) -> bool {
    forwards_to(l) == Some(tg)
        && l.protocol.as_deref().unwrap_or("") == port.protocol
        && l.certificates.first() == port.certificate.as_ref()
}

/// The target group a listener's default actions forward to.
pub(super) fn forwards_to(l: &Listener) -> Option<&str> {
    l.default_actions
        .iter()
        .find_map(|a| a.target_group_arn.as_deref())
}

/// The planned health check as AWS settings (no matcher: NLB checks have none).
pub(super) fn health_settings(hc: &TargetHealthCheck) -> HealthCheckSettings {
    HealthCheckSettings {
        protocol: hc.protocol.clone(),
        port: hc.port.clone(),
        path: hc.path.clone(),
        interval: hc.interval,
        timeout: hc.timeout,
        healthy_threshold: hc.healthy_threshold,
        unhealthy_threshold: hc.unhealthy_threshold,
        http_codes: None,
    }
}

/// A live health check with AWS's NLB defaults for what it leaves out.
pub(super) fn live_health(h: &HealthCheck) -> TargetHealthCheck {
    TargetHealthCheck {
        protocol: h.protocol.clone().unwrap_or_else(|| "TCP".into()),
        port: h.port.clone().unwrap_or_else(|| "traffic-port".into()),
        path: h.path.clone(),
        interval: h.interval.unwrap_or(30),
        timeout: h.timeout.unwrap_or(10),
        healthy_threshold: h.healthy_threshold.unwrap_or(3),
        unhealthy_threshold: h.unhealthy_threshold.unwrap_or(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::elbv2::ActionView;

    fn port(cert: Option<&str>) -> NetworkPort {
        NetworkPort {
            port: 443,
            protocol: "TLS".into(),
            certificate: cert.map(str::to_string),
            ssl_policy: Some("p".into()),
            target_group: "tg".into(),
            target_protocol: "TCP".into(),
            node_port: 30443,
        }
    }

    #[test]
    fn a_listener_matches_its_plan_by_target_protocol_and_certificate() {
        let live = Listener {
            port: Some(443),
            protocol: Some("TLS".into()),
            default_actions: vec![ActionView {
                kind: "forward".into(),
                target_group_arn: Some("arn:tg".into()),
                redirect_port: None,
            }],
            certificates: vec!["c".into()],
            ..Listener::default()
        };
        assert!(listener_matches(&live, &port(Some("c")), "arn:tg"));
        assert!(!listener_matches(&live, &port(Some("d")), "arn:tg"));
        assert!(!listener_matches(&live, &port(Some("c")), "arn:other"));
    }

    #[test]
    fn a_repointed_listener_keeps_its_port_and_policy() {
        let s = repointed_listener(&port(None), "arn:tg");
        assert_eq!(s.port, None);
        assert_eq!(s.ssl_policy, None);
        assert_eq!(s.default_action, DefaultAction::Forward("arn:tg".into()));
    }

    #[test]
    fn a_live_health_check_reads_aws_defaults() {
        let h = live_health(&HealthCheck::default());
        assert_eq!(h.protocol, "TCP");
        assert_eq!(h.port, "traffic-port");
        assert_eq!((h.interval, h.timeout), (30, 10));
    }
}
