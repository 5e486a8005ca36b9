//! IngressClassParams laid over an Ingress's annotations, as upstream: a group, scheme, IP
//! address type, certificate, SSL policy, subnets, inbound CIDRs or target type the class sets
//! wins over the Ingress's own annotation; tags and load-balancer attributes are merged, the
//! class's value winning per key. The namespace selector decides which namespaces may use it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use stratus_aws_api::subnets::SubnetInfo;

use crate::crd::IngressClassParamsSpec;
use crate::ingress::annotations::IngressAnnotations;
use crate::tgb::targets::selector_matches;

/// Where the problems come from.
const WHO: &str = "IngressClassParams";

/// Lays `params` over `a`; the problems of `params`' own values.
pub fn apply(a: &mut IngressAnnotations, params: &IngressClassParamsSpec) -> Vec<String> {
    let mut p = Vec::new();
    if let Some(g) = &params.group {
        let ok = !g.name.is_empty()
            && g.name.len() <= 63
            && g.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if ok {
            a.group = Some(g.name.clone());
        } else {
            p.push(format!("{WHO} spec.group.name: {:?} must be a DNS label of lower-case letters, digits, '-' or '.' (at most 63)", g.name));
        }
    }
    if let Some(s) = &params.scheme {
        match s.as_str() {
            "internal" => a.internet_facing = Some(false),
            "internet-facing" => a.internet_facing = Some(true),
            _ => p.push(format!(
                "{WHO} spec.scheme: {s:?} (internal or internet-facing)"
            )),
        }
    }
    if let Some(t) = &params.ip_address_type {
        match t.as_str() {
            "ipv4" => a.dualstack = Some(false),
            "dualstack" => a.dualstack = Some(true),
            _ => p.push(format!(
                "{WHO} spec.ipAddressType: {t:?} (ipv4 or dualstack)"
            )),
        }
    }
    if let Some(t) = &params.target_type {
        match t.as_str() {
            "ip" => a.ip_targets = Some(true),
            "instance" => a.ip_targets = Some(false),
            _ => p.push(format!("{WHO} spec.targetType: {t:?} (instance or ip)")),
        }
    }
    for (list, field, into) in [
        (&params.tags, "tags", &mut a.tags),
        (
            &params.load_balancer_attributes,
            "loadBalancerAttributes",
            &mut a.lb_attributes,
        ),
    ] {
        for t in list {
            if t.key.trim().is_empty() {
                p.push(format!("{WHO} spec.{field}: an entry has an empty key"));
            } else {
                into.insert(t.key.clone(), t.value.clone());
            }
        }
    }
    if !params.certificate_arn.is_empty() {
        a.certificates = params.certificate_arn.clone();
    }
    if let Some(policy) = &params.ssl_policy {
        a.ssl_policy = Some(policy.clone());
    }
    if let Some(s) = &params.subnets {
        match (s.ids.is_empty(), s.tags.is_empty()) {
            (false, false) => p.push(format!("{WHO} spec.subnets: give ids or tags, not both")),
            (false, true) => {
                a.subnets = s.ids.clone();
                a.subnet_tags.clear();
            }
            (true, false) => {
                a.subnets.clear();
                a.subnet_tags = s.tags.clone();
            }
            (true, true) => {}
        }
    }
    if !params.inbound_cidrs.is_empty() {
        a.inbound_cidrs = params.inbound_cidrs.clone();
        if let Err(e) = stratus_aws_api::sg_rules::check_source_ranges(&a.inbound_cidrs) {
            p.push(format!("{WHO} spec.inboundCIDRs: {e}"));
        }
    }
    p
}

/// The subnets (one per zone, the lowest ID) whose tags carry every key of `tags` with one of
/// its values (an empty list: any value).
pub fn subnets_matching(
    all: &[SubnetInfo],
    tags: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<String>, String> {
    let mut by_zone: BTreeMap<&str, &str> = BTreeMap::new();
    for s in all {
        let fits = tags.iter().all(|(k, values)| {
            s.tags
                .get(k)
                .is_some_and(|v| values.is_empty() || values.contains(v))
        });
        if fits {
            let slot = by_zone.entry(&s.zone).or_insert(&s.id);
            if s.id.as_str() < *slot {
                *slot = &s.id;
            }
        }
    }
    if by_zone.is_empty() {
        return Err(format!(
            "{WHO} spec.subnets.tags: no subnet of the VPC carries {tags:?}"
        ));
    }
    Ok(by_zone.into_values().map(str::to_string).collect())
}

/// Whether an Ingress of a namespace with `labels` may use a class whose params select
/// namespaces with `selector` (none: every namespace).
pub fn namespace_allowed(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    selector_matches(selector, labels).map_err(|e| format!("{WHO} spec.namespaceSelector: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Attribute, IngressGroup, SubnetSelector, Tag};
    use crate::ingress::annotations::{parse, parse_for, PREFIX};

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn the_class_wins_and_merges() {
        let params = IngressClassParamsSpec {
            group: Some(IngressGroup {
                name: "edge".into(),
            }),
            scheme: Some("internet-facing".into()),
            ip_address_type: Some("dualstack".into()),
            tags: vec![Tag {
                key: "team".into(),
                value: "platform".into(),
            }],
            load_balancer_attributes: vec![Attribute {
                key: "idle_timeout.timeout_seconds".into(),
                value: "120".into(),
            }],
            certificate_arn: vec!["arn:class".into()],
            ssl_policy: Some("ELBSecurityPolicy-TLS13-1-2-2021-06".into()),
            subnets: Some(SubnetSelector {
                ids: Vec::new(),
                tags: BTreeMap::from([("tier".into(), vec!["web".into()])]),
            }),
            inbound_cidrs: vec!["10.0.0.0/8".into()],
            target_type: Some("ip".into()),
            ..IngressClassParamsSpec::default()
        };
        let own = ann(&[
            ("group.name", "mine"),
            ("scheme", "internal"),
            ("tags", "team=app,env=prod"),
            (
                "load-balancer-attributes",
                "deletion_protection.enabled=false",
            ),
            ("certificate-arn", "arn:own"),
            ("subnets", "subnet-1"),
            ("target-type", "instance"),
        ]);
        let a = parse_for(&own, Some(&params)).unwrap();
        assert_eq!(a.group.as_deref(), Some("edge"));
        assert_eq!(a.internet_facing, Some(true));
        assert_eq!(a.dualstack, Some(true));
        assert_eq!(a.tags["team"], "platform");
        assert_eq!(a.tags["env"], "prod");
        assert_eq!(a.lb_attributes.len(), 2);
        assert_eq!(a.certificates, vec!["arn:class"]);
        assert!(a.subnets.is_empty());
        assert_eq!(a.subnet_tags["tier"], vec!["web"]);
        assert_eq!(a.inbound_cidrs, vec!["10.0.0.0/8"]);
        assert_eq!(a.ip_targets, Some(true));
        // The class's certificate makes the default listener HTTPS on 443.
        assert!(a.listen_ports.iter().all(|l| l.https && l.port == 443));
        // Without the class, the Ingress's own values.
        let a = parse(&own).unwrap();
        assert_eq!(a.group.as_deref(), Some("mine"));
        assert_eq!(a.internet_facing, Some(false));
    }

    #[test]
    fn bad_params_are_problems_with_their_field() {
        let params = IngressClassParamsSpec {
            group: Some(IngressGroup {
                name: "Bad_G".into(),
            }),
            scheme: Some("public".into()),
            ip_address_type: Some("ipv6".into()),
            subnets: Some(SubnetSelector {
                ids: vec!["subnet-1".into()],
                tags: BTreeMap::from([("t".into(), vec![])]),
            }),
            inbound_cidrs: vec!["nope".into()],
            ..IngressClassParamsSpec::default()
        };
        let text = parse_for(&BTreeMap::new(), Some(&params))
            .unwrap_err()
            .join("\n");
        for field in [
            "spec.group.name",
            "spec.scheme",
            "spec.ipAddressType",
            "spec.subnets",
            "spec.inboundCIDRs",
        ] {
            assert!(text.contains(field), "{field} missing in:\n{text}");
        }
    }

    #[test]
    fn subnets_by_tags_one_per_zone() {
        let subnet = |id: &str, zone: &str, tier: &str| SubnetInfo {
            id: id.into(),
            zone: zone.into(),
            tags: BTreeMap::from([("tier".to_string(), tier.to_string())]),
            public: false,
            cidr: String::new(),
        };
        let all = [
            subnet("subnet-b", "a", "web"),
            subnet("subnet-a", "a", "web"),
            subnet("subnet-c", "b", "web"),
            subnet("subnet-d", "b", "db"),
        ];
        let web = BTreeMap::from([("tier".to_string(), vec!["web".to_string()])]);
        assert_eq!(
            subnets_matching(&all, &web).unwrap(),
            vec!["subnet-a", "subnet-c"]
        );
        let any = BTreeMap::from([("tier".to_string(), vec![])]);
        assert_eq!(subnets_matching(&all, &any).unwrap().len(), 2);
        let none = BTreeMap::from([("tier".to_string(), vec!["cache".to_string()])]);
        assert!(subnets_matching(&all, &none)
            .unwrap_err()
            .contains("spec.subnets.tags"));
    }

    #[test]
    fn namespace_selector() {
        let sel: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"team": "edge"}})).unwrap();
        let edge = BTreeMap::from([("team".to_string(), "edge".to_string())]);
        assert!(namespace_allowed(Some(&sel), &edge).unwrap());
        assert!(!namespace_allowed(Some(&sel), &BTreeMap::new()).unwrap());
        assert!(namespace_allowed(None, &BTreeMap::new()).unwrap());
        let bad: LabelSelector = serde_json::from_value(serde_json::json!(
            {"matchExpressions": [{"key": "a", "operator": "Near"}]}))
        .unwrap();
        assert!(namespace_allowed(Some(&bad), &edge)
            .unwrap_err()
            .contains("namespaceSelector"));
    }
}
