//! The desired ALB of one Ingress group, as a pure function of the group's Ingresses: members
//! ordered by `group.order` then namespace/name, listeners from `listen-ports`, one rule per
//! host × path in that order (priorities 1, 2, …), one target group per Service backend
//! (registered through an internal TargetGroupBinding), HTTP → HTTPS redirect when asked.
//! Conflicting settings between members are problems, not silent choices.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::ingress::annotations::{self, HealthCheck, IngressAnnotations, ListenPort};

/// Which group an Ingress belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupId {
    /// `group.name` (or the IngressClassParams group).
    Explicit(String),
    /// An Ingress alone: namespace/name.
    Implicit(String, String),
}

impl GroupId {
    /// A short stable string (names, tags).
    pub fn key(&self) -> String {
        match self {
            GroupId::Explicit(n) => n.clone(),
            GroupId::Implicit(ns, n) => format!("{ns}/{n}"),
        }
    }
}

/// One rule condition set and where it sends traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// 1-based priority.
    pub priority: i32,
    /// Host headers (empty: any).
    pub hosts: Vec<String>,
    /// Path patterns (empty: any).
    pub paths: Vec<String>,
    /// The target group key it forwards to.
    pub target_group: String,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Protocol and port.
    pub port: ListenPort,
    /// Certificates (HTTPS).
    pub certificates: Vec<String>,
    /// HTTPS: the security policy (None: the AWS default).
    pub ssl_policy: Option<String>,
    /// Redirect every request to this HTTPS port instead of the rules.
    pub redirect_to: Option<i32>,
    /// Rules in priority order.
    pub rules: Vec<RuleSpec>,
}

/// A backend target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupSpec {
    /// Its AWS name (≤ 32 chars, stable per backend).
    pub name: String,
    /// The Service's namespace.
    pub namespace: String,
    /// The Service.
    pub service: String,
    /// The Service port (number or name).
    pub port: IntOrString,
    /// `ip` targets (else `instance`).
    pub ip: bool,
    /// Health check.
    pub health: HealthCheck,
    /// Attributes to hold (others are left as they are).
    pub attributes: BTreeMap<String, String>,
}

/// The desired ALB of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlbSpec {
    /// The group.
    pub group: GroupId,
    /// The load balancer's AWS name (≤ 32 chars).
    pub name: String,
    /// Internet-facing (else internal).
    pub internet_facing: bool,
    /// `dualstack` (else `ipv4`).
    pub dualstack: bool,
    /// Load-balancer attributes to hold (others are left as they are).
    pub attributes: BTreeMap<String, String>,
    /// Listeners by port.
    pub listeners: Vec<ListenerSpec>,
    /// Target groups by name.
    pub target_groups: BTreeMap<String, TargetGroupSpec>,
    /// Subnets asked for (empty: discovered by tags).
    pub subnets: Vec<String>,
    /// Subnets by tag (IngressClassParams): key → accepted values.
    pub subnet_tags: BTreeMap<String, Vec<String>>,
    /// Security groups given (empty: a managed one).
    pub security_groups: Vec<String>,
    /// With given groups: attach the backend group and manage the targets' rules (any member
    /// asking for it).
    pub manage_backend_rules: bool,
    /// Inbound CIDRs of the managed group.
    pub inbound_cidrs: Vec<String>,
    /// Tags from the members.
    pub tags: BTreeMap<String, String>,
    /// Members (namespace/name), in order.
    pub members: Vec<(String, String)>,
}

#[cfg(test)]
impl AlbSpec {
    /// A plan of group `g` with nothing in it (tests fill what they look at).
    pub(crate) fn empty() -> Self {
        AlbSpec {
            group: GroupId::Explicit("g".into()),
            name: "k8s-g-abc".into(),
            internet_facing: false,
            dualstack: false,
            attributes: BTreeMap::new(),
            listeners: Vec::new(),
            target_groups: BTreeMap::new(),
            subnets: Vec::new(),
            subnet_tags: BTreeMap::new(),
            security_groups: Vec::new(),
            manage_backend_rules: false,
            inbound_cidrs: Vec::new(),
            tags: BTreeMap::new(),
            members: Vec::new(),
        }
    }
}

#[cfg(test)]
impl ListenerSpec {
    /// A listener on `port` (HTTPS with `certificates`), no rules.
    pub(crate) fn on(port: i32, https: bool, certificates: &[&str]) -> Self {
        ListenerSpec {
            port: ListenPort { https, port },
            certificates: certificates.iter().map(|c| c.to_string()).collect(),
            ssl_policy: None,
            redirect_to: None,
            rules: Vec::new(),
        }
    }
}

pub(crate) fn hash8(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()[..5]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn clip(s: &str, n: usize) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(n)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// `k8s-<group>-<hash>`, at most 32 characters.
pub fn load_balancer_name(cluster: &str, group: &GroupId) -> String {
    let key = group.key();
    format!(
        "k8s-{}-{}",
        clip(&key.replace('/', "-"), 17),
        hash8(&[cluster, &key])
    )
}

/// `k8s-<ns>-<svc>-<hash>`, at most 32 characters.
pub fn target_group_name(
    cluster: &str,
    group: &GroupId,
    ns: &str,
    svc: &str,
    port: &IntOrString,
    ip: bool,
) -> String {
    let port = match port {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let hash = hash8(&[
        cluster,
        &group.key(),
        ns,
        svc,
        &port,
        if ip { "ip" } else { "instance" },
    ]);
    format!("k8s-{}-{}-{hash}", clip(ns, 7), clip(svc, 7))
}

/// Path patterns of one Ingress path.
pub fn path_patterns(path: Option<&str>, path_type: &str) -> Result<Vec<String>, String> {
    let path = path.unwrap_or("/");
    if !path.starts_with('/') {
        return Err(format!("path {path:?} must start with /"));
    }
    Ok(match path_type {
        "Exact" => vec![path.to_string()],
        "Prefix" if path == "/" => vec!["/*".to_string()],
        "Prefix" => {
            let base = path.trim_end_matches('/');
            vec![base.to_string(), format!("{base}/*")]
        }
        // As written (AWS wildcards * and ?).
        "ImplementationSpecific" => vec![path.to_string()],
        other => {
            return Err(format!(
                "pathType {other:?} (Exact, Prefix or ImplementationSpecific)"
            ))
        }
    })
}

/// The group an Ingress belongs to (its IngressClassParams' group is already in `ann`).
pub fn group_of(ing: &Ingress, ann: &IngressAnnotations) -> GroupId {
    match ann.group.clone() {
        Some(g) => GroupId::Explicit(g),
        None => GroupId::Implicit(
            ing.metadata.namespace.clone().unwrap_or_default(),
            ing.metadata.name.clone().unwrap_or_default(),
        ),
    }
}

/// Annotations of an Ingress as a map.
pub fn annotations_of(ing: &Ingress) -> BTreeMap<String, String> {
    ing.metadata.annotations.clone().unwrap_or_default()
}

fn backend_service(b: &IngressBackend) -> Result<(String, IntOrString), String> {
    let svc = b
        .service
        .as_ref()
        .ok_or("only Service backends are supported (not resource backends)")?;
    let port = svc
        .port
        .as_ref()
        .ok_or("backend service port is required")?;
    let port = match (&port.number, &port.name) {
        (Some(n), _) => IntOrString::Int(*n),
        (None, Some(n)) => IntOrString::String(n.clone()),
        _ => return Err("backend service port needs a number or a name".into()),
    };
    Ok((svc.name.clone(), port))
}

/// Builds the ALB of a group from its members (any order; without IngressClassParams);
/// `default_ip` is `--default-target-type=ip`. Errors name the member and every problem.
pub fn plan_alb(
    cluster: &str,
    group: &GroupId,
    members: &[&Ingress],
    default_ip: bool,
) -> Result<AlbSpec, Vec<String>> {
    let mut problems = Vec::new();
    let mut parsed: Vec<(&Ingress, IngressAnnotations)> = Vec::new();
    for ing in members {
        match annotations::parse(&annotations_of(ing)) {
            Ok(a) => parsed.push((ing, a)),
            Err(ps) => {
                let who = member_name(ing);
                problems.extend(ps.into_iter().map(|p| format!("{who}: {p}")))
            }
        }
    }
    match plan_parsed(cluster, group, parsed, default_ip) {
        Ok(spec) if problems.is_empty() => Ok(spec),
        Ok(_) => Err(problems),
        Err(more) => {
            problems.extend(more);
            Err(problems)
        }
    }
}

/// `namespace/name`.
pub fn member_name(ing: &Ingress) -> String {
    format!(
        "{}/{}",
        ing.metadata.namespace.as_deref().unwrap_or_default(),
        ing.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Records `value` of a setting every member must agree on; a second, different value is a
/// problem naming the group.
fn agree<T: PartialEq + std::fmt::Debug + Clone>(
    problems: &mut Vec<String>,
    group: &GroupId,
    what: &str,
    slot: &mut Option<T>,
    value: Option<&T>,
) {
    match (slot.as_ref(), value) {
        (_, None) => {}
        (None, Some(v)) => *slot = Some(v.clone()),
        (Some(have), Some(v)) if have == v => {}
        (Some(have), Some(v)) => problems.push(format!(
            "group {}: members disagree on {what} ({have:?} and {v:?})",
            group.key()
        )),
    }
}

/// Builds the ALB of a group from its members with their annotations already parsed (under
/// their class's IngressClassParams).
pub fn plan_parsed(
    cluster: &str,
    group: &GroupId,
    mut parsed: Vec<(&Ingress, IngressAnnotations)>,
    default_ip: bool,
) -> Result<AlbSpec, Vec<String>> {
    let mut problems = Vec::new();
    parsed.sort_by_key(|(ing, a)| {
        (
            a.order,
            ing.metadata.namespace.clone().unwrap_or_default(),
            ing.metadata.name.clone().unwrap_or_default(),
        )
    });
    let first =
        |f: &dyn Fn(&IngressAnnotations) -> Option<bool>| parsed.iter().find_map(|(_, a)| f(a));
    let internet_facing = first(&|a| a.internet_facing).unwrap_or(false);
    if parsed
        .iter()
        .filter_map(|(_, a)| a.internet_facing)
        .collect::<BTreeSet<_>>()
        .len()
        > 1
    {
        problems.push(format!("group {}: members disagree on scheme", group.key()));
    }
    let mut dualstack = None;
    let mut ssl_policy = None;
    let mut subnet_tags = None;
    let mut attributes: BTreeMap<String, String> = BTreeMap::new();
    for (_, a) in &parsed {
        agree(
            &mut problems,
            group,
            "ip-address-type",
            &mut dualstack,
            a.dualstack.as_ref(),
        );
        agree(
            &mut problems,
            group,
            "ssl-policy",
            &mut ssl_policy,
            a.ssl_policy.as_ref(),
        );
        let tags = Some(&a.subnet_tags).filter(|t| !t.is_empty());
        agree(&mut problems, group, "subnet tags", &mut subnet_tags, tags);
        for (k, v) in &a.lb_attributes {
            let mut slot = attributes.get(k).cloned();
            agree(&mut problems, group, k, &mut slot, Some(v));
            attributes.insert(k.clone(), v.clone());
        }
    }
    let mut ports: BTreeMap<ListenPort, ListenerSpec> = BTreeMap::new();
    let mut target_groups = BTreeMap::new();
    let mut tags = BTreeMap::new();
    let mut subnets = Vec::new();
    let mut security_groups = Vec::new();
    let mut inbound_cidrs = Vec::new();
    let mut redirect: Option<i32> = None;
    let mut members_out = Vec::new();
    for (ing, a) in &parsed {
        let ns = ing.metadata.namespace.clone().unwrap_or_default();
        let name = ing.metadata.name.clone().unwrap_or_default();
        members_out.push((ns.clone(), name.clone()));
        tags.extend(a.tags.clone());
        for (list, extra) in [
            (&mut subnets, &a.subnets),
            (&mut security_groups, &a.security_groups),
            (&mut inbound_cidrs, &a.inbound_cidrs),
        ] {
            for s in extra {
                if !list.contains(s) {
                    list.push(s.clone());
                }
            }
        }
        if a.ssl_redirect.is_some() {
            redirect = a.ssl_redirect;
        }
        let ip = a.ip_targets.unwrap_or(default_ip);
        let mut add_backend = |b: &IngressBackend| -> Result<String, String> {
            let (svc, port) = backend_service(b)?;
            let tg = target_group_name(cluster, group, &ns, &svc, &port, ip);
            target_groups.entry(tg.clone()).or_insert(TargetGroupSpec {
                name: tg.clone(),
                namespace: ns.clone(),
                service: svc,
                port,
                ip,
                health: a.health.clone(),
                attributes: a.tg_attributes.clone(),
            });
            Ok(tg)
        };
        let spec = ing.spec.clone().unwrap_or_default();
        let mut rules: Vec<(Vec<String>, Vec<String>, String)> = Vec::new();
        for rule in spec.rules.iter().flatten() {
            let hosts: Vec<String> = rule.host.iter().cloned().collect();
            for path in rule.http.iter().flat_map(|h| h.paths.iter()) {
                let patterns = match path_patterns(path.path.as_deref(), &path.path_type) {
                    Ok(p) => p,
                    Err(e) => {
                        problems.push(format!("{ns}/{name}: {e}"));
                        continue;
                    }
                };
                match add_backend(&path.backend) {
                    Ok(tg) => rules.push((hosts.clone(), patterns, tg)),
                    Err(e) => problems.push(format!("{ns}/{name}: {e}")),
                }
            }
        }
        if let Some(b) = &spec.default_backend {
            match add_backend(b) {
                Ok(tg) => rules.push((Vec::new(), vec!["/*".into()], tg)),
                Err(e) => problems.push(format!("{ns}/{name}: {e}")),
            }
        }
        for lp in &a.listen_ports {
            let l = ports.entry(*lp).or_insert(ListenerSpec {
                port: *lp,
                certificates: Vec::new(),
                ssl_policy: ssl_policy.clone().filter(|_| lp.https),
                redirect_to: None,
                rules: Vec::new(),
            });
            if lp.https {
                for c in &a.certificates {
                    if !l.certificates.contains(c) {
                        l.certificates.push(c.clone());
                    }
                }
            }
            for (hosts, paths, tg) in &rules {
                l.rules.push(RuleSpec {
                    priority: 0,
                    hosts: hosts.clone(),
                    paths: paths.clone(),
                    target_group: tg.clone(),
                });
            }
        }
    }
    let mut listeners: Vec<ListenerSpec> = ports.into_values().collect();
    for l in &mut listeners {
        if !l.port.https && redirect.is_some() {
            l.redirect_to = redirect;
            l.rules.clear();
        }
        for (i, r) in l.rules.iter_mut().enumerate() {
            r.priority = i as i32 + 1;
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(AlbSpec {
        group: group.clone(),
        name: load_balancer_name(cluster, group),
        internet_facing,
        dualstack: dualstack.unwrap_or(false),
        attributes,
        listeners,
        target_groups,
        subnets,
        subnet_tags: subnet_tags.unwrap_or_default(),
        manage_backend_rules: parsed.iter().any(|(_, a)| a.manage_backend_rules),
        security_groups,
        inbound_cidrs,
        tags,
        members: members_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ing(name: &str, ann: serde_json::Value, rules: serde_json::Value) -> Ingress {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "shop", "annotations": ann},
            "spec": {"ingressClassName": "alb", "rules": rules}}))
        .unwrap()
    }

    fn path(p: &str, t: &str, svc: &str) -> serde_json::Value {
        serde_json::json!({"path": p, "pathType": t,
            "backend": {"service": {"name": svc, "port": {"number": 80}}}})
    }

    #[test]
    fn two_hosts_three_paths_make_ordered_rules() {
        let i = ing(
            "web",
            serde_json::json!({}),
            serde_json::json!([
                {"host": "a.example.com", "http": {"paths": [
                    path("/api", "Prefix", "api"), path("/login", "Exact", "auth")]}},
                {"host": "b.example.com", "http": {"paths": [path("/", "Prefix", "web")]}}]),
        );
        let g = GroupId::Implicit("shop".into(), "web".into());
        let alb = plan_alb("c", &g, &[&i], false).unwrap();
        assert!(alb.name.len() <= 32, "{}", alb.name);
        assert_eq!(alb.listeners.len(), 1);
        let rules = &alb.listeners[0].rules;
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].priority, 1);
        assert_eq!(rules[0].hosts, vec!["a.example.com"]);
        assert_eq!(rules[0].paths, vec!["/api", "/api/*"]);
        assert_eq!(rules[1].paths, vec!["/login"]);
        assert_eq!(rules[2].hosts, vec!["b.example.com"]);
        assert_eq!(rules[2].paths, vec!["/*"]);
        assert_eq!(alb.target_groups.len(), 3);
        assert!(alb.target_groups.keys().all(|n| n.len() <= 32));
    }

    #[test]
    fn group_members_merge_by_order_then_name() {
        let a = ing(
            "a",
            serde_json::json!({"alb.ingress.kubernetes.io/group.name": "g",
                               "alb.ingress.kubernetes.io/group.order": "10"}),
            serde_json::json!([{"http": {"paths": [path("/a", "Exact", "sa")]}}]),
        );
        let b = ing(
            "b",
            serde_json::json!({"alb.ingress.kubernetes.io/group.name": "g",
                               "alb.ingress.kubernetes.io/group.order": "-1"}),
            serde_json::json!([{"http": {"paths": [path("/b", "Exact", "sb")]}}]),
        );
        let g = GroupId::Explicit("g".into());
        let alb = plan_alb("c", &g, &[&a, &b], false).unwrap();
        let paths: Vec<&str> = alb.listeners[0]
            .rules
            .iter()
            .map(|r| r.paths[0].as_str())
            .collect();
        assert_eq!(paths, vec!["/b", "/a"]);
        assert_eq!(alb.members[0].1, "b");
        // Without b, a's rule alone, same ALB name.
        let only_a = plan_alb("c", &g, &[&a], false).unwrap();
        assert_eq!(only_a.name, alb.name);
        assert_eq!(only_a.listeners[0].rules.len(), 1);
    }

    #[test]
    fn https_redirect_and_problems() {
        let i = ing(
            "tls",
            serde_json::json!({
                "alb.ingress.kubernetes.io/listen-ports": r#"[{"HTTP":80},{"HTTPS":443}]"#,
                "alb.ingress.kubernetes.io/certificate-arn": "arn:cert",
                "alb.ingress.kubernetes.io/ssl-redirect": "443"}),
            serde_json::json!([{"http": {"paths": [path("/", "Prefix", "web")]}}]),
        );
        let g = GroupId::Implicit("shop".into(), "tls".into());
        let alb = plan_alb("c", &g, &[&i], true).unwrap();
        assert_eq!(alb.listeners.len(), 2);
        assert_eq!(alb.listeners[0].redirect_to, Some(443));
        assert!(alb.listeners[0].rules.is_empty());
        assert_eq!(alb.listeners[1].certificates, vec!["arn:cert"]);
        assert_eq!(alb.listeners[1].rules.len(), 1);
        assert!(alb.target_groups.values().all(|t| t.ip));
        let bad = ing(
            "bad",
            serde_json::json!({"alb.ingress.kubernetes.io/scheme": "public"}),
            serde_json::json!([{"http": {"paths": [path("nope", "Prefix", "web")]}}]),
        );
        let e = plan_alb("c", &g, &[&bad], false).unwrap_err().join("\n");
        assert!(e.contains("scheme") && e.contains("shop/bad"), "{e}");
    }
}
