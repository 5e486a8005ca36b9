//! The listener steps of an NLB as a pure plan from the live listeners and the wanted ones: a
//! port no longer wanted is deleted, a new one created, a changed protocol replaces the
//! listener, and a changed target group or TLS setting (default certificate, policy, ALPN) is
//! one ModifyListener. Deletions come first, so a replaced port is free when it is created.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::ProtocolEnum;
use stratus_aws_api::elbv2::{DefaultAction, Listener, ListenerSettings};

use crate::ingress::live::extra_of;
use crate::service::plan::L4Protocol;

/// A listener as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveListener {
    /// ARN.
    pub arn: String,
    /// Protocol (`TCP`, `UDP`, ...).
    pub protocol: String,
    /// The target group its default action forwards to.
    pub target_group: Option<String>,
    /// The default certificate (TLS).
    pub certificate: Option<String>,
    /// The security policy (TLS).
    pub ssl_policy: Option<String>,
    /// The ALPN policy (TLS), if any.
    pub alpn: Option<String>,
}

impl LiveListener {
    /// A described listener by port (None when AWS left out its port, ARN or protocol).
    pub fn of(l: &Listener) -> Option<(i32, Self)> {
        Some((
            l.port?,
            LiveListener {
                arn: l.arn.clone()?,
                protocol: l.protocol.clone()?,
                target_group: l
                    .default_actions
                    .first()
                    .and_then(|a| a.target_group_arn.clone()),
                certificate: l.certificates.first().cloned(),
                ssl_policy: l.ssl_policy.clone(),
                alpn: l.alpn_policy.first().cloned(),
            },
        ))
    }
}

/// A listener as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedListener {
    /// Port.
    pub port: i32,
    /// Protocol.
    pub protocol: L4Protocol,
    /// The target group it forwards to.
    pub target_group: String,
    /// TLS: the certificates (the first is the default one).
    pub certificates: Vec<String>,
    /// TLS: the security policy.
    pub ssl_policy: Option<String>,
    /// TLS: the ALPN policy.
    pub alpn: Option<String>,
}

impl WantedListener {
    /// CreateListener: an L4 listener forwarding everything to its target group; a TLS one with
    /// its default certificate, policy and ALPN policy (the other certificates are added after).
    pub fn create_settings(&self) -> ListenerSettings {
        ListenerSettings {
            port: Some(self.port),
            protocol: Some(protocol_enum(self.protocol)),
            certificate: self.certificates.first().cloned(),
            ssl_policy: self.ssl_policy.clone(),
            alpn_policy: self.alpn.clone(),
            default_action: DefaultAction::Forward(self.target_group.clone()),
        }
    }

    /// ModifyListener: the target group and, on a TLS listener, its default certificate,
    /// policy and ALPN policy; port and protocol stay.
    pub fn modify_settings(&self) -> ListenerSettings {
        ListenerSettings {
            port: None,
            protocol: None,
            ..self.create_settings()
        }
    }
}

/// The ELBv2 protocol of an L4 listener or target group.
pub fn protocol_enum(p: L4Protocol) -> ProtocolEnum {
    match p {
        L4Protocol::Tcp => ProtocolEnum::Tcp,
        L4Protocol::Udp => ProtocolEnum::Udp,
        L4Protocol::Tls => ProtocolEnum::Tls,
        L4Protocol::TcpUdp => ProtocolEnum::TcpUdp,
    }
}

/// One listener change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerStep {
    /// Delete the listener with this ARN.
    Delete(String),
    /// Create the listener.
    Create(WantedListener),
    /// Change the listener with this ARN in place.
    Modify(String, WantedListener),
}

/// The steps that make `live` the `wanted` listeners: deletions, then modifications and
/// creations in port order. Nothing when they match.
pub fn plan(live: &BTreeMap<i32, LiveListener>, wanted: &[WantedListener]) -> Vec<ListenerStep> {
    let mut deletes = Vec::new();
    let mut rest = Vec::new();
    for (port, l) in live {
        let want = wanted.iter().find(|w| w.port == *port);
        if want.is_none_or(|w| l.protocol != w.protocol.as_str()) {
            deletes.push(ListenerStep::Delete(l.arn.clone()));
        }
    }
    for w in wanted {
        match live.get(&w.port) {
            Some(l) if l.protocol == w.protocol.as_str() => {
                if differs(l, w) {
                    rest.push(ListenerStep::Modify(l.arn.clone(), w.clone()));
                }
            }
            _ => rest.push(ListenerStep::Create(w.clone())),
        }
    }
    deletes.extend(rest);
    deletes
}

/// Whether a listener of the wanted protocol forwards elsewhere or has other TLS settings.
fn differs(live: &LiveListener, want: &WantedListener) -> bool {
    if live.target_group.as_deref() != Some(want.target_group.as_str()) {
        return true;
    }
    want.protocol.as_str() == "TLS"
        && (live.certificate.as_ref() != want.certificates.first()
            || live.ssl_policy != want.ssl_policy
            || live.alpn != want.alpn)
}

/// The certificates a TLS listener carries beyond its default one, sorted.
pub fn extra_certificates(want: &WantedListener) -> Vec<String> {
    extra_of(&want.certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(port: i32, protocol: L4Protocol, tg: &str, cert: Option<&str>) -> WantedListener {
        WantedListener {
            port,
            protocol,
            target_group: tg.into(),
            certificates: cert.map(str::to_string).into_iter().collect(),
            ssl_policy: cert.map(|_| "ELBSecurityPolicy-2016-08".to_string()),
            alpn: None,
        }
    }

    fn live(w: &WantedListener, arn: &str) -> (i32, LiveListener) {
        (
            w.port,
            LiveListener {
                arn: arn.into(),
                protocol: w.protocol.as_str().into(),
                target_group: Some(w.target_group.clone()),
                certificate: w.certificates.first().cloned(),
                ssl_policy: w.ssl_policy.clone(),
                alpn: w.alpn.clone(),
            },
        )
    }

    #[test]
    fn matching_listeners_need_nothing() {
        let w = vec![
            want(80, L4Protocol::Tcp, "tg-a", None),
            want(443, L4Protocol::Tls, "tg-b", Some("arn:c1")),
        ];
        let l: BTreeMap<_, _> = [live(&w[0], "l80"), live(&w[1], "l443")].into();
        assert!(plan(&l, &w).is_empty());
    }

    #[test]
    fn a_protocol_change_replaces_and_the_delete_comes_first() {
        let old = want(443, L4Protocol::Tcp, "tg-b", None);
        let l: BTreeMap<_, _> = [live(&old, "l443")].into();
        let new = want(443, L4Protocol::Tls, "tg-b", Some("arn:c1"));
        assert_eq!(
            plan(&l, std::slice::from_ref(&new)),
            vec![
                ListenerStep::Delete("l443".into()),
                ListenerStep::Create(new)
            ]
        );
    }

    #[test]
    fn certificate_policy_alpn_or_target_changes_modify_in_place() {
        let w = want(443, L4Protocol::Tls, "tg-b", Some("arn:c1"));
        let l: BTreeMap<_, _> = [live(&w, "l443")].into();
        let mut rotated = w.clone();
        rotated.certificates = vec!["arn:c2".into()];
        let mut policy = w.clone();
        policy.ssl_policy = Some("ELBSecurityPolicy-TLS13-1-2-2021-06".into());
        let mut alpn = w.clone();
        alpn.alpn = Some("HTTP2Preferred".into());
        let mut target = w.clone();
        target.target_group = "tg-c".into();
        for changed in [rotated, policy, alpn, target] {
            assert_eq!(
                plan(&l, std::slice::from_ref(&changed)),
                vec![ListenerStep::Modify("l443".into(), changed)]
            );
        }
    }

    #[test]
    fn ports_no_longer_wanted_go_and_new_ones_come() {
        let old = want(80, L4Protocol::Udp, "tg-a", None);
        let l: BTreeMap<_, _> = [live(&old, "l80")].into();
        let new = want(81, L4Protocol::TcpUdp, "tg-d", None);
        assert_eq!(
            plan(&l, std::slice::from_ref(&new)),
            vec![
                ListenerStep::Delete("l80".into()),
                ListenerStep::Create(new)
            ]
        );
    }

    #[test]
    fn extra_certificates_skip_the_default() {
        let mut w = want(443, L4Protocol::Tls, "tg", Some("arn:c1"));
        w.certificates.extend(["arn:c3".into(), "arn:c2".into()]);
        assert_eq!(extra_certificates(&w), vec!["arn:c2", "arn:c3"]);
    }
}
