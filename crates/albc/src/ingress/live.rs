//! What the Ingress driver knows of an ALB's AWS state, as pure data over the API crate's values:
//! what the last apply of a group left, a listener with the extra certificates last read or
//! applied, a target group with its health check in the annotations' terms; and how plans
//! become the ELBv2 client's settings.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::ProtocolEnum;
use stratus_aws_api::elbv2::{
    DefaultAction, HealthCheckSettings, Listener, ListenerSettings, LoadBalancer, Rule, TargetGroup,
};
use tokio::time::Instant;

use crate::ingress::annotations::HealthCheck;
use crate::ingress::plan::{AlbSpec, ListenerSpec};

/// What the last successful apply of a group left in AWS.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The plan applied.
    pub(crate) spec: AlbSpec,
    /// The load balancer.
    pub(crate) lb: LoadBalancer,
    /// Target groups of the stack by name.
    pub(crate) target_groups: BTreeMap<String, LiveTargetGroup>,
    /// Listeners by port.
    pub(crate) listeners: BTreeMap<i32, LiveListener>,
    /// Rules by listener port.
    pub(crate) rules: BTreeMap<i32, Vec<Rule>>,
    /// The backend group named in the bindings' networking.
    pub(crate) backend: Option<String>,
    /// When.
    pub(crate) at: Instant,
}

impl Applied {
    /// The ALB's DNS name (the members' hostname).
    pub fn hostname(&self) -> &str {
        &self.lb.dns_name
    }
}

/// A listener as AWS has it (or the last apply left it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveListener {
    /// ARN.
    pub arn: String,
    /// HTTPS (else HTTP).
    pub https: bool,
    /// The default certificate (HTTPS).
    pub certificate: Option<String>,
    /// The security policy (HTTPS).
    pub ssl_policy: Option<String>,
    /// The default action redirects to this HTTPS port (else a fixed 404 answer).
    pub redirect_to: Option<i32>,
    /// Certificates beyond the default, sorted; None when not read.
    pub extra_certificates: Option<Vec<String>>,
}

impl LiveListener {
    /// A described listener by port (None when AWS left out its port or ARN).
    pub fn of(l: &Listener) -> Option<(i32, Self)> {
        let redirect_to = l
            .default_actions
            .iter()
            .find_map(|a| a.redirect_port.as_deref())
            .and_then(|p| p.parse().ok());
        Some((
            l.port?,
            LiveListener {
                arn: l.arn.clone()?,
                https: l.protocol.as_deref() == Some(ProtocolEnum::Https.as_str()),
                certificate: l.certificates.first().cloned(),
                ssl_policy: l.ssl_policy.clone(),
                redirect_to,
                extra_certificates: None,
            },
        ))
    }

    /// What a listener made from `l` is, its extra certificates added.
    pub fn made(arn: String, l: &ListenerSpec) -> Self {
        LiveListener {
            arn,
            https: l.port.https,
            certificate: l.certificates.first().cloned(),
            ssl_policy: l.ssl_policy.clone(),
            redirect_to: l.redirect_to,
            extra_certificates: Some(sorted_extra(l)),
        }
    }
}

/// A planned listener as the ELBv2 client's settings: protocol, port, default certificate,
/// policy, and a 404 fixed response or the redirect to HTTPS by default.
pub fn listener_settings(l: &ListenerSpec) -> ListenerSettings {
    ListenerSettings {
        port: Some(l.port.port),
        protocol: Some(if l.port.https {
            ProtocolEnum::Https
        } else {
            ProtocolEnum::Http
        }),
        certificate: l.certificates.first().cloned(),
        ssl_policy: l.ssl_policy.clone(),
        alpn_policy: None,
        default_action: match l.redirect_to {
            Some(port) => DefaultAction::RedirectHttps(port),
            None => DefaultAction::NotFound,
        },
    }
}

/// The certificates of a planned listener beyond its default one, sorted.
pub fn sorted_extra(l: &ListenerSpec) -> Vec<String> {
    extra_of(&l.certificates)
}

/// The certificates of a list beyond the first (the listener's default one), sorted, once each.
pub fn extra_of(certificates: &[String]) -> Vec<String> {
    let mut extra: Vec<String> = certificates.iter().skip(1).cloned().collect();
    extra.sort();
    extra.dedup();
    extra
}

/// A target group as AWS has it, its health check in the annotations' terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTargetGroup {
    /// Name.
    pub name: String,
    /// ARN.
    pub arn: String,
    /// Health check.
    pub health: HealthCheck,
}

impl LiveTargetGroup {
    /// A described target group (None when AWS left out its name or ARN); what AWS leaves out
    /// of its health check reads as the defaults.
    pub fn of(g: &TargetGroup) -> Option<Self> {
        if g.name.is_empty() || g.arn.is_empty() {
            return None;
        }
        let d = HealthCheck::default();
        let h = &g.health_check;
        Some(LiveTargetGroup {
            name: g.name.clone(),
            arn: g.arn.clone(),
            health: HealthCheck {
                path: h.path.clone().unwrap_or(d.path),
                port: h.port.clone().unwrap_or(d.port),
                protocol: h.protocol.clone().unwrap_or(d.protocol),
                interval: h.interval.unwrap_or(d.interval),
                timeout: h.timeout.unwrap_or(d.timeout),
                healthy: h.healthy_threshold.unwrap_or(d.healthy),
                unhealthy: h.unhealthy_threshold.unwrap_or(d.unhealthy),
                success_codes: h.http_codes.clone().unwrap_or(d.success_codes),
            },
        })
    }
}

/// A planned health check as the ELBv2 client's settings: the path and success codes only for
/// HTTP(S) checks.
pub fn health_settings(h: &HealthCheck) -> HealthCheckSettings {
    let http = h.protocol.starts_with("HTTP");
    HealthCheckSettings {
        protocol: h.protocol.clone(),
        port: h.port.clone(),
        path: Some(h.path.clone()).filter(|_| http),
        interval: h.interval,
        timeout: h.timeout,
        healthy_threshold: h.healthy,
        unhealthy_threshold: h.unhealthy,
        http_codes: Some(h.success_codes.clone()).filter(|_| http),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::elbv2::ActionView;

    #[test]
    fn a_described_listener_reads_its_redirect_and_default_certificate() {
        let l = Listener {
            arn: Some("l".into()),
            port: Some(80),
            protocol: Some("HTTP".into()),
            default_actions: vec![ActionView {
                kind: "redirect".into(),
                target_group_arn: None,
                redirect_port: Some("443".into()),
            }],
            ..Listener::default()
        };
        let (port, live) = LiveListener::of(&l).unwrap();
        assert_eq!(port, 80);
        assert!(!live.https);
        assert_eq!(live.redirect_to, Some(443));
        assert_eq!(live.extra_certificates, None);
        assert!(LiveListener::of(&Listener::default()).is_none());
    }

    #[test]
    fn tcp_checks_send_no_path_or_codes() {
        let tcp = HealthCheck {
            protocol: "TCP".into(),
            ..HealthCheck::default()
        };
        let s = health_settings(&tcp);
        assert_eq!((s.path, s.http_codes), (None, None));
        let s = health_settings(&HealthCheck::default());
        assert_eq!(s.path.as_deref(), Some("/"));
    }

    #[test]
    fn an_unreported_health_check_reads_as_the_defaults() {
        let g = TargetGroup {
            arn: "a".into(),
            name: "n".into(),
            ..TargetGroup::default()
        };
        assert_eq!(
            LiveTargetGroup::of(&g).unwrap().health,
            HealthCheck::default()
        );
    }
}
