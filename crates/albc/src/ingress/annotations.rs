//! The `alb.ingress.kubernetes.io/*` annotations this build understands, parsed into a typed
//! form; every problem is collected (never the first only) so one Warning Event lists them all.
//! The IngressClassParams of the Ingress's class, when it has one, are laid over them before
//! the defaults and the checks across settings.

use std::collections::BTreeMap;

use crate::crd::IngressClassParamsSpec;
use crate::ingress::class_params;

/// Annotation prefix.
pub const PREFIX: &str = "alb.ingress.kubernetes.io/";

/// Annotations this build reads; any other `alb.ingress.kubernetes.io/*` key is refused.
pub const KNOWN: &[&str] = &[
    "group.name",
    "group.order",
    "scheme",
    "target-type",
    "listen-ports",
    "certificate-arn",
    "ssl-redirect",
    "ssl-policy",
    "healthcheck-path",
    "healthcheck-port",
    "healthcheck-protocol",
    "healthcheck-interval-seconds",
    "healthcheck-timeout-seconds",
    "healthy-threshold-count",
    "unhealthy-threshold-count",
    "success-codes",
    "subnets",
    "security-groups",
    "manage-backend-security-group-rules",
    "tags",
    "inbound-cidrs",
    "target-group-attributes",
    "ip-address-type",
    "load-balancer-attributes",
];

/// A listener protocol and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListenPort {
    /// HTTPS (else HTTP).
    pub https: bool,
    /// The port.
    pub port: i32,
}

/// Health check of a backend target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Path.
    pub path: String,
    /// `traffic-port` or a number.
    pub port: String,
    /// `HTTP` or `HTTPS`.
    pub protocol: String,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds before a check fails.
    pub timeout: i32,
    /// Successes to turn healthy.
    pub healthy: i32,
    /// Failures to turn unhealthy.
    pub unhealthy: i32,
    /// HTTP codes counted healthy.
    pub success_codes: String,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            path: "/".into(),
            port: "traffic-port".into(),
            protocol: "HTTP".into(),
            interval: 15,
            timeout: 5,
            healthy: 2,
            unhealthy: 2,
            success_codes: "200".into(),
        }
    }
}

/// The parsed annotations of one Ingress.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IngressAnnotations {
    /// Explicit group name.
    pub group: Option<String>,
    /// Order in the group (-1000..=1000).
    pub order: i32,
    /// Internet-facing (else internal).
    pub internet_facing: Option<bool>,
    /// `ip` (else `instance`).
    pub ip_targets: Option<bool>,
    /// Listeners.
    pub listen_ports: Vec<ListenPort>,
    /// Certificate ARNs (first is the default).
    pub certificates: Vec<String>,
    /// Redirect HTTP to this HTTPS port.
    pub ssl_redirect: Option<i32>,
    /// HTTPS policy.
    pub ssl_policy: Option<String>,
    /// Health check.
    pub health: HealthCheck,
    /// Subnet IDs or names.
    pub subnets: Vec<String>,
    /// Security groups instead of the managed one.
    pub security_groups: Vec<String>,
    /// `manage-backend-security-group-rules: "true"`: with given groups, the shared backend
    /// group is attached too and the targets admit it.
    pub manage_backend_rules: bool,
    /// Extra tags.
    pub tags: BTreeMap<String, String>,
    /// Inbound CIDRs of the managed security group.
    pub inbound_cidrs: Vec<String>,
    /// `dualstack` (else `ipv4`).
    pub dualstack: Option<bool>,
    /// Load-balancer attributes (`key=value` pairs).
    pub lb_attributes: BTreeMap<String, String>,
    /// Target-group attributes of every backend (`key=value` pairs).
    pub tg_attributes: BTreeMap<String, String>,
    /// Subnets by tag (IngressClassParams `subnets.tags`): key → accepted values.
    pub subnet_tags: BTreeMap<String, Vec<String>>,
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn int(problems: &mut Vec<String>, key: &str, v: &str, lo: i32, hi: i32) -> Option<i32> {
    match v.trim().parse::<i32>() {
        Ok(n) if (lo..=hi).contains(&n) => Some(n),
        _ => {
            problems.push(format!(
                "{PREFIX}{key}: {v:?} is not a number in {lo}..{hi}"
            ));
            None
        }
    }
}

/// `[{"HTTP": 80}, {"HTTPS": 443}]`.
fn listen_ports(problems: &mut Vec<String>, v: &str) -> Vec<ListenPort> {
    let parsed: Result<Vec<BTreeMap<String, i64>>, _> = serde_json::from_str(v);
    let Ok(entries) = parsed else {
        problems.push(format!(
            "{PREFIX}listen-ports: {v:?} is not a JSON list like [{{\"HTTP\": 80}}]"
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (proto, port) in entries.iter().flatten() {
        let https = match proto.as_str() {
            "HTTP" => false,
            "HTTPS" => true,
            other => {
                problems.push(format!(
                    "{PREFIX}listen-ports: protocol {other:?} (HTTP or HTTPS)"
                ));
                continue;
            }
        };
        match i32::try_from(*port) {
            Ok(p) if (1..=65535).contains(&p) => out.push(ListenPort { https, port: p }),
            _ => problems.push(format!("{PREFIX}listen-ports: port {port} out of range")),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Parses the annotations; `Err` lists every problem.
pub fn parse(annotations: &BTreeMap<String, String>) -> Result<IngressAnnotations, Vec<String>> {
    parse_for(annotations, None)
}

/// Parses the annotations under the IngressClassParams of the Ingress's class (whose settings
/// win over the annotations'); `Err` lists every problem of both.
pub fn parse_for(
    annotations: &BTreeMap<String, String>,
    params: Option<&IngressClassParamsSpec>,
) -> Result<IngressAnnotations, Vec<String>> {
    let (mut a, mut p) = parse_raw(annotations);
    if let Some(params) = params {
        p.extend(class_params::apply(&mut a, params));
    }
    finish(a, p)
}

/// `key=value,key=value` into `into`; malformed pairs are problems of `key`.
pub(crate) fn pairs(p: &mut Vec<String>, key: &str, v: &str, into: &mut BTreeMap<String, String>) {
    for pair in list(v) {
        match pair.split_once('=') {
            Some((tk, tv)) if !tk.trim().is_empty() => {
                into.insert(tk.trim().to_string(), tv.trim().to_string());
            }
            _ => p.push(format!("{key}: {pair:?} is not key=value")),
        }
    }
}

/// Every annotation read on its own; the cross-field checks and defaults are [`finish`]'s.
fn parse_raw(annotations: &BTreeMap<String, String>) -> (IngressAnnotations, Vec<String>) {
    let mut p = Vec::new();
    let mut a = IngressAnnotations::default();
    for (k, v) in annotations {
        let Some(key) = k.strip_prefix(PREFIX) else {
            continue;
        };
        match key {
            "group.name" => {
                let ok = !v.is_empty()
                    && v.len() <= 63
                    && v.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
                    });
                if ok {
                    a.group = Some(v.clone());
                } else {
                    p.push(format!("{k}: {v:?} must be a DNS label of lower-case letters, digits, '-' or '.' (at most 63)"));
                }
            }
            "group.order" => a.order = int(&mut p, key, v, -1000, 1000).unwrap_or(0),
            "scheme" => match v.as_str() {
                "internal" => a.internet_facing = Some(false),
                "internet-facing" => a.internet_facing = Some(true),
                _ => p.push(format!("{k}: {v:?} (internal or internet-facing)")),
            },
            "target-type" => match v.as_str() {
                "ip" => a.ip_targets = Some(true),
                "instance" => a.ip_targets = Some(false),
                _ => p.push(format!("{k}: {v:?} (instance or ip)")),
            },
            "listen-ports" => a.listen_ports = listen_ports(&mut p, v),
            "certificate-arn" => a.certificates = list(v),
            "ssl-redirect" => a.ssl_redirect = int(&mut p, key, v, 1, 65535),
            "ssl-policy" => a.ssl_policy = Some(v.clone()),
            "healthcheck-path" => {
                if v.starts_with('/') {
                    a.health.path = v.clone();
                } else {
                    p.push(format!("{k}: {v:?} must start with /"));
                }
            }
            "healthcheck-port" => {
                if v == "traffic-port" || int(&mut p, key, v, 1, 65535).is_some() {
                    a.health.port = v.clone();
                }
            }
            "healthcheck-protocol" => match v.as_str() {
                "HTTP" | "HTTPS" => a.health.protocol = v.clone(),
                _ => p.push(format!("{k}: {v:?} (HTTP or HTTPS)")),
            },
            "healthcheck-interval-seconds" => {
                a.health.interval = int(&mut p, key, v, 5, 300).unwrap_or(a.health.interval)
            }
            "healthcheck-timeout-seconds" => {
                a.health.timeout = int(&mut p, key, v, 2, 120).unwrap_or(a.health.timeout)
            }
            "healthy-threshold-count" => {
                a.health.healthy = int(&mut p, key, v, 2, 10).unwrap_or(a.health.healthy)
            }
            "unhealthy-threshold-count" => {
                a.health.unhealthy = int(&mut p, key, v, 2, 10).unwrap_or(a.health.unhealthy)
            }
            "success-codes" => a.health.success_codes = v.clone(),
            "subnets" => a.subnets = list(v),
            "security-groups" => a.security_groups = list(v),
            "manage-backend-security-group-rules" => match v.as_str() {
                "true" => a.manage_backend_rules = true,
                "false" => a.manage_backend_rules = false,
                _ => p.push(format!("{k}: {v:?} (true or false)")),
            },
            "inbound-cidrs" => {
                a.inbound_cidrs = list(v);
                if let Err(e) = stratus_aws_api::sg_rules::check_source_ranges(&a.inbound_cidrs) {
                    p.push(format!("{k}: {e}"));
                }
            }
            "tags" => pairs(&mut p, k, v, &mut a.tags),
            "load-balancer-attributes" => pairs(&mut p, k, v, &mut a.lb_attributes),
            "target-group-attributes" => pairs(&mut p, k, v, &mut a.tg_attributes),
            "ip-address-type" => match v.as_str() {
                "ipv4" => a.dualstack = Some(false),
                "dualstack" => a.dualstack = Some(true),
                _ => p.push(format!("{k}: {v:?} (ipv4 or dualstack)")),
            },
            other => p.push(format!("{PREFIX}{other}: not supported by this build")),
        }
    }
    (a, p)
}

/// Defaults that depend on other settings, then the checks across annotations.
fn finish(
    mut a: IngressAnnotations,
    mut p: Vec<String>,
) -> Result<IngressAnnotations, Vec<String>> {
    if a.listen_ports.is_empty() {
        a.listen_ports = vec![if a.certificates.is_empty() {
            ListenPort {
                https: false,
                port: 80,
            }
        } else {
            ListenPort {
                https: true,
                port: 443,
            }
        }];
    }
    if a.listen_ports.iter().any(|l| l.https) && a.certificates.is_empty() {
        p.push(format!(
            "{PREFIX}listen-ports: an HTTPS listener needs {PREFIX}certificate-arn"
        ));
    }
    if let Some(port) = a.ssl_redirect {
        if !a.listen_ports.iter().any(|l| l.https && l.port == port) {
            p.push(format!(
                "{PREFIX}ssl-redirect: {port} is not an HTTPS port of listen-ports"
            ));
        }
    }
    if p.is_empty() {
        Ok(a)
    } else {
        Err(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_and_values() {
        let a = parse(&BTreeMap::new()).unwrap();
        assert_eq!(
            a.listen_ports,
            vec![ListenPort {
                https: false,
                port: 80
            }]
        );
        assert_eq!(a.health, HealthCheck::default());
        let a = parse(&ann(&[
            ("group.name", "shop"),
            ("group.order", "-5"),
            ("scheme", "internet-facing"),
            ("target-type", "ip"),
            ("listen-ports", r#"[{"HTTP": 80}, {"HTTPS": 443}]"#),
            ("certificate-arn", "arn:a, arn:b"),
            ("ssl-redirect", "443"),
            ("healthcheck-path", "/ping"),
            ("tags", "team=edge,env=prod"),
        ]))
        .unwrap();
        assert_eq!(a.group.as_deref(), Some("shop"));
        assert_eq!(a.order, -5);
        assert_eq!(a.internet_facing, Some(true));
        assert_eq!(a.ip_targets, Some(true));
        assert_eq!(a.listen_ports.len(), 2);
        assert_eq!(a.certificates, vec!["arn:a", "arn:b"]);
        assert_eq!(a.ssl_redirect, Some(443));
        assert_eq!(a.health.path, "/ping");
        assert_eq!(a.tags["team"], "edge");
        // A certificate alone means HTTPS on 443.
        let a = parse(&ann(&[("certificate-arn", "arn:c")])).unwrap();
        assert_eq!(
            a.listen_ports,
            vec![ListenPort {
                https: true,
                port: 443
            }]
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let e = parse(&ann(&[
            ("scheme", "public"),
            ("group.order", "5000"),
            ("listen-ports", r#"[{"HTTPS": 443}]"#),
            ("ssl-redirect", "8443"),
            ("waf-acl-id", "x"),
            ("group.name", "Bad_Name"),
        ]))
        .unwrap_err();
        let text = e.join("\n");
        for needle in [
            "scheme",
            "group.order",
            "certificate-arn",
            "ssl-redirect",
            "waf-acl-id",
            "group.name",
        ] {
            assert!(text.contains(needle), "{needle} missing in:\n{text}");
        }
    }
}
