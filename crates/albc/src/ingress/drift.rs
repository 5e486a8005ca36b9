//! What differs between an ALB as AWS (or the last apply) has it and its plan, as pure
//! functions: a listener's protocol, default certificate, SSL policy or default action (one
//! ModifyListener), its extra certificates (added and removed by difference), the load
//! balancer's security groups, IP address type and attributes, a target group's health check
//! and attributes.

use std::collections::BTreeMap;

use stratus_aws_api::elbv2::LoadBalancer;

use crate::ingress::annotations::HealthCheck;
use crate::ingress::live::{sorted_extra, LiveListener};
use crate::ingress::plan::{AlbSpec, ListenerSpec};

/// Whether the listener needs a ModifyListener to match `want` (the extra certificates are
/// [`certificate_changes`]'s).
pub fn listener_differs(live: &LiveListener, want: &ListenerSpec) -> bool {
    live.https != want.port.https
        || live.certificate.as_ref() != want.certificates.first()
        || (want.port.https && want.ssl_policy.is_some() && live.ssl_policy != want.ssl_policy)
        || live.redirect_to != want.redirect_to
}

/// The extra certificates to add and to remove (`live` sorted, as read or last applied).
pub fn certificate_changes(live: &[String], want: &ListenerSpec) -> (Vec<String>, Vec<String>) {
    list_changes(live, &sorted_extra(want))
}

/// What to add to `live` and remove from it to make it `want`.
pub fn list_changes(live: &[String], want: &[String]) -> (Vec<String>, Vec<String>) {
    let add = want.iter().filter(|c| !live.contains(c)).cloned().collect();
    let remove = live.iter().filter(|c| !want.contains(c)).cloned().collect();
    (add, remove)
}

/// The security groups the load balancer must carry, sorted, when they are not the ones it has.
pub fn security_groups_to_set(lb: &LoadBalancer, wanted: &[String]) -> Option<Vec<String>> {
    let mut wanted = wanted.to_vec();
    wanted.sort();
    wanted.dedup();
    (lb.security_groups != wanted).then_some(wanted)
}

/// Whether a live health check differs from the planned one in what AWS applies: the path and
/// success codes only count for HTTP(S) checks (AWS reports its own defaults for TCP ones).
pub fn health_differs(live: &HealthCheck, want: &HealthCheck) -> bool {
    let http = want.protocol.starts_with("HTTP");
    live.protocol != want.protocol
        || live.port != want.port
        || live.interval != want.interval
        || live.timeout != want.timeout
        || live.healthy != want.healthy
        || live.unhealthy != want.unhealthy
        || (http && (live.path != want.path || live.success_codes != want.success_codes))
}

/// The planned load-balancer attributes whose live value differs (or is absent).
pub fn attributes_to_set(
    live: &BTreeMap<String, String>,
    spec: &AlbSpec,
) -> BTreeMap<String, String> {
    differing(live, &spec.attributes)
}

/// The `wanted` attributes whose live value differs (or is absent).
pub fn differing(
    live: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    wanted
        .iter()
        .filter(|(k, v)| live.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(https: bool, certs: &[&str], redirect: Option<i32>) -> ListenerSpec {
        ListenerSpec {
            redirect_to: redirect,
            ..ListenerSpec::on(443, https, certs)
        }
    }

    fn live(https: bool, cert: Option<&str>, redirect: Option<i32>) -> LiveListener {
        LiveListener {
            arn: "l".into(),
            https,
            certificate: cert.map(str::to_string),
            ssl_policy: Some("ELBSecurityPolicy-2016-08".into()),
            redirect_to: redirect,
            extra_certificates: None,
        }
    }

    #[test]
    fn listener_changes_are_seen() {
        let want = listener(true, &["arn:a", "arn:b"], None);
        assert!(!listener_differs(&live(true, Some("arn:a"), None), &want));
        // Another default certificate, the protocol, the redirect.
        assert!(listener_differs(&live(true, Some("arn:x"), None), &want));
        assert!(listener_differs(&live(false, None, None), &want));
        assert!(listener_differs(
            &live(false, None, Some(443)),
            &listener(false, &[], None)
        ));
        // A policy is compared only when one is planned.
        let mut pinned = want.clone();
        pinned.ssl_policy = Some("ELBSecurityPolicy-TLS13-1-2-2021-06".into());
        assert!(listener_differs(&live(true, Some("arn:a"), None), &pinned));
        let (add, remove) = certificate_changes(&["arn:c".into()], &want);
        assert_eq!((add, remove), (vec!["arn:b".into()], vec!["arn:c".into()]));
    }

    #[test]
    fn health_checks_compare_what_applies() {
        let tcp = HealthCheck {
            protocol: "TCP".into(),
            ..HealthCheck::default()
        };
        let reported = HealthCheck {
            path: String::new(),
            success_codes: String::new(),
            ..tcp.clone()
        };
        assert!(!health_differs(&reported, &tcp));
        let http = HealthCheck::default();
        let moved = HealthCheck {
            path: "/healthz".into(),
            ..http.clone()
        };
        assert!(health_differs(&moved, &http));
        assert!(health_differs(&http, &tcp));
    }

    #[test]
    fn groups_and_attributes() {
        let lb = LoadBalancer {
            arn: "a".into(),
            dns_name: "d".into(),
            security_groups: vec!["sg-1".into(), "sg-2".into()],
            ..LoadBalancer::default()
        };
        assert_eq!(
            security_groups_to_set(&lb, &["sg-2".into(), "sg-1".into()]),
            None
        );
        assert_eq!(
            security_groups_to_set(&lb, &["sg-3".into()]),
            Some(vec!["sg-3".to_string()])
        );
        let spec = AlbSpec {
            attributes: BTreeMap::from([
                ("idle_timeout.timeout_seconds".into(), "120".into()),
                ("deletion_protection.enabled".into(), "false".into()),
            ]),
            ..AlbSpec::empty()
        };
        let live = BTreeMap::from([
            ("idle_timeout.timeout_seconds".to_string(), "60".to_string()),
            (
                "deletion_protection.enabled".to_string(),
                "false".to_string(),
            ),
        ]);
        let set = attributes_to_set(&live, &spec);
        assert_eq!(set.len(), 1);
        assert_eq!(set["idle_timeout.timeout_seconds"], "120");
    }
}
