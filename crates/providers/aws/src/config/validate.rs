//! Validation: raw INI sections to a typed [`CloudConfig`], collecting every problem on the way.

use std::collections::HashMap;

use super::error::{shown, truncate, ConfigProblem};
use super::ini::{RawEntry, RawSection};
use super::values::{
    canonical_service, check_endpoint_url, check_pattern, check_probe_path, is_region, parse_bool,
    parse_port, zone_region,
};
use super::{
    CloudConfig, GlobalConfig, HealthProbeMode, IpFamily, NlbSecurityGroupMode, ServiceOverride,
    DEFAULT_SHARED_HEALTH_PROBE_PATH, DEFAULT_SHARED_HEALTH_PROBE_PORT,
};

const GLOBAL: &str = "Global";
const SERVICE_OVERRIDE: &str = "ServiceOverride";

/// Keys of `[Global]`, spelled as upstream.
const GLOBAL_KEYS: &[&str] = &[
    "Zone",
    "Region",
    "VPC",
    "SubnetID",
    "RouteTableID",
    "RoleARN",
    "SourceARN",
    "KubernetesClusterTag",
    "KubernetesClusterID",
    "DisableSecurityGroupIngress",
    "ElbSecurityGroup",
    "NodeIPFamilies",
    "ClusterServiceLoadBalancerHealthProbeMode",
    "ClusterServiceSharedLoadBalancerHealthProbePort",
    "ClusterServiceSharedLoadBalancerHealthProbePath",
    "SupportedTopologyInstanceTypePattern",
    "NLBSecurityGroupMode",
];

/// Keys of `[ServiceOverride "name"]`, spelled as upstream.
const OVERRIDE_KEYS: &[&str] = &[
    "Service",
    "Region",
    "URL",
    "SigningRegion",
    "SigningMethod",
    "SigningName",
];

/// Keys that may be given more than once (each adds a value; a bare key clears the list).
const REPEATABLE_KEYS: &[&str] = &["NodeIPFamilies"];

/// Keys of older upstream versions that are no longer read.
const REMOVED_KEYS: &[&str] = &["DisableStrictZoneCheck"];

/// Turns raw sections into the typed config, appending every problem to `problems`.
pub(crate) fn validate(sections: &[RawSection], problems: &mut Vec<ConfigProblem>) -> CloudConfig {
    let grouped = group(sections, problems);
    let global = keyed(GLOBAL.to_owned(), &grouped.global, GLOBAL_KEYS, problems);
    let global = global_config(&global, problems);
    let mut overrides = Vec::new();
    for (name, raws) in &grouped.overrides {
        let section = keyed(override_label(name), raws, OVERRIDE_KEYS, problems);
        overrides.extend(service_override(name, &section, problems));
    }
    check_duplicate_overrides(&overrides, problems);
    CloudConfig {
        global,
        service_overrides: overrides.into_iter().map(|(o, _)| o).collect(),
    }
}

/// The raw sections sorted by kind; overrides grouped by name in order of first appearance.
#[derive(Default)]
struct Grouped<'a> {
    global: Vec<&'a RawSection>,
    overrides: Vec<(String, Vec<&'a RawSection>)>,
}

/// Sorts raw sections into `[Global]` and overrides, reporting sections that are neither.
fn group<'a>(sections: &'a [RawSection], problems: &mut Vec<ConfigProblem>) -> Grouped<'a> {
    let mut grouped = Grouped::default();
    for raw in sections {
        if raw.name.eq_ignore_ascii_case(GLOBAL) {
            if raw.subsection.is_some() {
                problems.push(
                    ConfigProblem::new("[Global] takes no name, so this section is not read")
                        .in_section(raw_label(raw))
                        .at_line(raw.line),
                );
            } else {
                grouped.global.push(raw);
            }
        } else if raw.name.eq_ignore_ascii_case(SERVICE_OVERRIDE) {
            // gcfg reads `[ServiceOverride]` as the override named "".
            let name = raw.subsection.clone().unwrap_or_default();
            match grouped.overrides.iter_mut().find(|(n, _)| *n == name) {
                Some((_, same)) => same.push(raw),
                None => grouped.overrides.push((name, vec![raw])),
            }
        } else {
            problems.push(
                ConfigProblem::new(
                    "unknown section; valid sections are [Global] and [ServiceOverride \"name\"]",
                )
                .in_section(raw_label(raw))
                .at_line(raw.line),
            );
        }
    }
    grouped
}

/// `name` or `name "sub"`, as written.
fn raw_label(raw: &RawSection) -> String {
    match &raw.subsection {
        Some(sub) => format!("{} {:?}", truncate(&raw.name), truncate(sub)),
        None => truncate(&raw.name),
    }
}

/// `ServiceOverride "name"`.
fn override_label(name: &str) -> String {
    format!("{SERVICE_OVERRIDE} {:?}", truncate(name))
}

/// One logical section (all its headers merged): entries by schema key, duplicates dropped.
struct Section<'a> {
    label: String,
    header_line: Option<usize>,
    keys: HashMap<&'static str, Vec<&'a RawEntry>>,
}

impl<'a> Section<'a> {
    /// The (only) entry of a single-valued key.
    fn first(&self, key: &str) -> Option<&'a RawEntry> {
        self.keys.get(key).and_then(|e| e.first().copied())
    }

    /// Every entry of a repeatable key, in file order.
    fn all(&self, key: &str) -> &[&'a RawEntry] {
        self.keys.get(key).map_or(&[], Vec::as_slice)
    }

    /// A problem with `key` of this section, on `line`.
    fn problem(&self, key: &str, line: Option<usize>, message: impl Into<String>) -> ConfigProblem {
        let problem = ConfigProblem::new(message)
            .in_section(&self.label)
            .for_key(key);
        match line {
            Some(line) => problem.at_line(line),
            None => problem,
        }
    }
}

/// Files the entries of `raws` under their schema keys; reports unknown and repeated keys.
fn keyed<'a>(
    label: String,
    raws: &[&'a RawSection],
    schema: &[&'static str],
    problems: &mut Vec<ConfigProblem>,
) -> Section<'a> {
    let mut section = Section {
        label,
        header_line: raws.first().map(|r| r.line),
        keys: HashMap::new(),
    };
    for entry in raws.iter().flat_map(|r| &r.entries) {
        let Some(&key) = schema.iter().find(|k| k.eq_ignore_ascii_case(&entry.key)) else {
            let message = unknown_key_message(&entry.key, schema);
            problems.push(section.problem(&entry.key, Some(entry.line), message));
            continue;
        };
        let seen = section.keys.entry(key).or_default();
        match seen.first() {
            Some(first) if !REPEATABLE_KEYS.contains(&key) => {
                let message = format!(
                    "is set more than once (first on line {}); keep only one",
                    first.line
                );
                problems.push(section.problem(key, Some(entry.line), message));
            }
            _ => seen.push(entry),
        }
    }
    section
}

/// Why `key` is not accepted, with the keys that are.
fn unknown_key_message(key: &str, schema: &[&str]) -> String {
    let is = |keys: &[&str]| keys.iter().any(|k| k.eq_ignore_ascii_case(key));
    let hint = if is(REMOVED_KEYS) {
        " (upstream no longer reads it; delete it)"
    } else if schema == GLOBAL_KEYS && is(OVERRIDE_KEYS) {
        " (it belongs in a [ServiceOverride \"name\"] section)"
    } else if schema == OVERRIDE_KEYS && is(GLOBAL_KEYS) {
        " (it belongs in [Global])"
    } else {
        ""
    };
    format!("unknown key{hint}; valid keys are {}", schema.join(", "))
}

/// The non-empty value of a single-valued key, with its line; a bare key (no `=`) is reported.
fn text<'a>(
    s: &Section<'a>,
    key: &'static str,
    problems: &mut Vec<ConfigProblem>,
) -> Option<(&'a str, usize)> {
    let entry = s.first(key)?;
    match entry.value.as_deref() {
        None => {
            problems.push(s.problem(key, Some(entry.line), "needs a value (`key = value`)"));
            None
        }
        Some("") => None,
        Some(value) => Some((value, entry.line)),
    }
}

/// An optional free-form string.
fn string(s: &Section<'_>, key: &'static str, problems: &mut Vec<ConfigProblem>) -> Option<String> {
    text(s, key, problems).map(|(v, _)| v.to_owned())
}

/// An optional value converted by `check`, whose error message is reported.
fn checked<T>(
    s: &Section<'_>,
    key: &'static str,
    problems: &mut Vec<ConfigProblem>,
    check: impl FnOnce(&str) -> Result<T, String>,
) -> Option<T> {
    let (value, line) = text(s, key, problems)?;
    check(value)
        .map_err(|message| problems.push(s.problem(key, Some(line), message)))
        .ok()
}

/// A boolean; a bare key means true, an absent one false.
fn boolean(s: &Section<'_>, key: &'static str, problems: &mut Vec<ConfigProblem>) -> bool {
    let Some(entry) = s.first(key) else {
        return false;
    };
    let Some(value) = entry.value.as_deref() else {
        return true;
    };
    parse_bool(value).unwrap_or_else(|| {
        let message = format!(
            "{} is not a boolean (use true/false, yes/no, on/off or 1/0)",
            shown(value)
        );
        problems.push(s.problem(key, Some(entry.line), message));
        false
    })
}

/// A required value, trimmed as upstream trims it; missing or empty is reported.
fn required(
    s: &Section<'_>,
    key: &'static str,
    problems: &mut Vec<ConfigProblem>,
) -> Option<(String, usize)> {
    let entry = s.first(key);
    let value = text(s, key, problems)
        .map(|(v, line)| (v.trim(), line))
        .filter(|(v, _)| !v.is_empty());
    match (value, entry) {
        (Some((v, line)), _) => Some((v.to_owned(), line)),
        (None, Some(RawEntry { value: None, .. })) => None,
        (None, Some(entry)) => {
            problems.push(s.problem(key, Some(entry.line), "is required but empty"));
            None
        }
        (None, None) => {
            problems.push(s.problem(key, s.header_line, "is required but missing"));
            None
        }
    }
}

/// Matches `value` exactly against `choices`; a case-only mismatch gets a hint.
fn enum_value<T: Copy>(value: &str, choices: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, t)) = choices.iter().find(|(name, _)| *name == value) {
        return Ok(*t);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let hint = choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(name, _)| format!(" (values are case-sensitive: write {name})"))
        .unwrap_or_default();
    Err(format!(
        "{} is not one of {}{hint}",
        shown(value),
        names.join(", ")
    ))
}

/// The `[Global]` section, defaults filled in.
fn global_config(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> GlobalConfig {
    let region = checked(s, "Region", problems, region_value);
    let zone = checked(s, "Zone", problems, zone_value);
    check_zone_in_region(s, zone.as_deref(), region.as_deref(), problems);
    let kubernetes_cluster_tag = string(s, "KubernetesClusterTag", problems);
    let kubernetes_cluster_id = string(s, "KubernetesClusterID", problems);
    check_cluster_ids_agree(s, &kubernetes_cluster_tag, &kubernetes_cluster_id, problems);
    GlobalConfig {
        zone,
        region,
        vpc: string(s, "VPC", problems),
        subnet_id: string(s, "SubnetID", problems),
        route_table_id: string(s, "RouteTableID", problems),
        role_arn: string(s, "RoleARN", problems),
        source_arn: string(s, "SourceARN", problems),
        kubernetes_cluster_tag,
        kubernetes_cluster_id,
        disable_security_group_ingress: boolean(s, "DisableSecurityGroupIngress", problems),
        elb_security_group: string(s, "ElbSecurityGroup", problems),
        node_ip_families: ip_families(s, problems),
        health_probe_mode: checked(
            s,
            "ClusterServiceLoadBalancerHealthProbeMode",
            problems,
            |v| {
                enum_value(
                    v,
                    &[
                        ("ServiceNodePort", HealthProbeMode::ServiceNodePort),
                        ("Shared", HealthProbeMode::Shared),
                    ],
                )
            },
        )
        .unwrap_or_default(),
        shared_health_probe_port: checked(
            s,
            "ClusterServiceSharedLoadBalancerHealthProbePort",
            problems,
            |v| parse_port(v).map_err(|m| format!("{} {m}", shown(v))),
        )
        .filter(|port| *port != 0)
        .unwrap_or(DEFAULT_SHARED_HEALTH_PROBE_PORT),
        shared_health_probe_path: checked(
            s,
            "ClusterServiceSharedLoadBalancerHealthProbePath",
            problems,
            |v| match check_probe_path(v) {
                Ok(()) => Ok(v.to_owned()),
                Err(m) => Err(format!("{} {m}", shown(v))),
            },
        )
        .unwrap_or_else(|| DEFAULT_SHARED_HEALTH_PROBE_PATH.to_owned()),
        supported_topology_instance_type_pattern: checked(
            s,
            "SupportedTopologyInstanceTypePattern",
            problems,
            |v| check_pattern(v).map(|()| v.to_owned()),
        ),
        nlb_security_group_mode: checked(s, "NLBSecurityGroupMode", problems, |v| {
            enum_value(v, &[("Managed", NlbSecurityGroupMode::Managed)])
        }),
    }
}

/// A region name.
fn region_value(v: &str) -> Result<String, String> {
    if is_region(v) {
        Ok(v.to_owned())
    } else {
        Err(format!("{} is not a valid AWS region name", shown(v)))
    }
}

/// A zone name.
fn zone_value(v: &str) -> Result<String, String> {
    if zone_region(v).is_some() {
        Ok(v.to_owned())
    } else {
        Err(format!(
            "{} is not a valid AWS availability zone name (a region followed by a zone letter, e.g. us-east-1a)",
            shown(v)
        ))
    }
}

/// Reports a `Zone` outside `Region`.
fn check_zone_in_region(
    s: &Section<'_>,
    zone: Option<&str>,
    region: Option<&str>,
    problems: &mut Vec<ConfigProblem>,
) {
    let (Some(zone), Some(region)) = (zone, region) else {
        return;
    };
    if zone_region(zone) != Some(region) {
        let line = s.first("Zone").map(|e| e.line);
        let message = format!("{} is not in Region {}", shown(zone), shown(region));
        problems.push(s.problem("Zone", line, message));
    }
}

/// Reports `KubernetesClusterTag` and `KubernetesClusterID` set to different IDs (upstream
/// refuses to start then).
fn check_cluster_ids_agree(
    s: &Section<'_>,
    tag: &Option<String>,
    id: &Option<String>,
    problems: &mut Vec<ConfigProblem>,
) {
    if let (Some(tag), Some(id)) = (tag, id) {
        if tag != id {
            let line = s.first("KubernetesClusterTag").map(|e| e.line);
            let message = format!(
                "{} differs from KubernetesClusterID {}; they must match when both are set",
                shown(tag),
                shown(id)
            );
            problems.push(s.problem("KubernetesClusterTag", line, message));
        }
    }
}

/// `NodeIPFamilies`: each entry adds a family, a bare key clears the list (as in gcfg);
/// default `[Ipv4]`.
fn ip_families(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> Vec<IpFamily> {
    const KEY: &str = "NodeIPFamilies";
    let mut families = Vec::new();
    for entry in s.all(KEY) {
        let Some(value) = entry.value.as_deref() else {
            families.clear();
            continue;
        };
        match ip_family(value) {
            Ok(family) if families.contains(&family) => {
                let message = format!("{} is listed more than once", family.as_str());
                problems.push(s.problem(KEY, Some(entry.line), message));
            }
            Ok(family) => families.push(family),
            Err(message) => problems.push(s.problem(KEY, Some(entry.line), message)),
        }
    }
    if families.is_empty() {
        families.push(IpFamily::Ipv4);
    }
    families
}

/// One `NodeIPFamilies` value.
fn ip_family(value: &str) -> Result<IpFamily, String> {
    enum_value(value, &[("ipv4", IpFamily::Ipv4), ("ipv6", IpFamily::Ipv6)]).map_err(
        |mut message| {
            if value.contains([',', ' ']) {
                message.push_str("; give one family per line, repeating the key");
            }
            message
        },
    )
}

/// One `[ServiceOverride "name"]` section, with the line of its `Service` key; `None` (with the
/// problems reported) when a required key is missing or the URL is bad.
fn service_override(
    name: &str,
    s: &Section<'_>,
    problems: &mut Vec<ConfigProblem>,
) -> Option<(ServiceOverride, usize)> {
    let service = required(s, "Service", problems);
    let region = required(s, "Region", problems);
    let url = required(s, "URL", problems).and_then(|(url, line)| match check_endpoint_url(&url) {
        Ok(()) => Some(url),
        Err(reason) => {
            // A URL with user info may hold a password: never echo it.
            let what = if url.contains('@') {
                "the URL".to_owned()
            } else {
                shown(&url)
            };
            problems.push(s.problem("URL", Some(line), format!("{what} {reason}")));
            None
        }
    });
    let signing_region = required(s, "SigningRegion", problems);
    let signing_method = string(s, "SigningMethod", problems);
    let signing_name = string(s, "SigningName", problems);
    let (service, service_line) = service?;
    let override_ = ServiceOverride {
        name: name.to_owned(),
        service: service.to_lowercase(),
        region: region?.0,
        url: url?,
        signing_region: signing_region?.0,
        signing_method,
        signing_name,
    };
    Some((override_, service_line))
}

/// Reports a second override of the same service (aliases folded) in the same region.
fn check_duplicate_overrides(
    overrides: &[(ServiceOverride, usize)],
    problems: &mut Vec<ConfigProblem>,
) {
    let mut seen: HashMap<(String, &str), &str> = HashMap::new();
    for (o, line) in overrides {
        let key = (canonical_service(&o.service), o.region.as_str());
        match seen.get(&key) {
            Some(first) => problems.push(
                ConfigProblem::new(format!(
                    "{} in {} is already overridden by [{}]",
                    shown(&o.service),
                    shown(&o.region),
                    override_label(first)
                ))
                .in_section(override_label(&o.name))
                .for_key("Service")
                .at_line(*line),
            ),
            None => {
                seen.insert(key, &o.name);
            }
        }
    }
}
