//! Validation: raw INI sections to a typed [`CloudConfig`], collecting every problem on the way.

use std::collections::HashMap;

use stratus_cloud_kit::gcfg::schema::section_label;
use stratus_cloud_kit::gcfg::{
    enum_value, group, ConfigProblem, KeySchema, RawSection, Section, SectionKind,
};

use super::values::{
    canonical_service, check_endpoint_url, check_pattern, check_probe_path, is_region, parse_port,
    zone_region,
};
use super::{
    CloudConfig, GlobalConfig, HealthProbeMode, IpFamily, NlbSecurityGroupMode, ServiceOverride,
    DEFAULT_SHARED_HEALTH_PROBE_PATH, DEFAULT_SHARED_HEALTH_PROBE_PORT,
};

const GLOBAL: &str = "Global";
const SERVICE_OVERRIDE: &str = "ServiceOverride";

/// Keys of `[Global]`, spelled as upstream.
pub(super) const GLOBAL_KEYS: &[&str] = &[
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
    "PublicNetworkAllowList",
];

/// Keys of `[ServiceOverride "name"]`, spelled as upstream.
pub(super) const OVERRIDE_KEYS: &[&str] = &[
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

/// The section kinds of the AWS cloud config.
const KINDS: &[SectionKind] = &[
    SectionKind {
        name: GLOBAL,
        named: false,
    },
    SectionKind {
        name: SERVICE_OVERRIDE,
        named: true,
    },
];

/// Turns raw sections into the typed config, appending every problem to `problems`.
pub(crate) fn validate(sections: &[RawSection], problems: &mut Vec<ConfigProblem>) -> CloudConfig {
    let groups = group(sections, KINDS, problems);
    let global_raws: Vec<&RawSection> = groups
        .iter()
        .filter(|g| g.kind.name == GLOBAL)
        .flat_map(|g| g.raws.iter().copied())
        .collect();
    let global = keyed(GLOBAL.to_owned(), &global_raws, GLOBAL_KEYS, problems);
    let global = global_config(&global, problems);
    let mut overrides = Vec::new();
    for g in groups.iter().filter(|g| g.kind.name == SERVICE_OVERRIDE) {
        let name = g.name.clone().unwrap_or_default();
        let section = keyed(g.label(), &g.raws, OVERRIDE_KEYS, problems);
        overrides.extend(service_override(&name, &section, problems));
    }
    check_duplicate_overrides(&overrides, problems);
    CloudConfig {
        global,
        service_overrides: overrides.into_iter().map(|(o, _)| o).collect(),
    }
}

/// `ServiceOverride "name"`.
fn override_label(name: &str) -> String {
    section_label(SERVICE_OVERRIDE, Some(name))
}

/// Files the entries of `raws` under the AWS keys of `schema`, with upstream's hints.
fn keyed<'a>(
    label: String,
    raws: &[&'a RawSection],
    schema: &[&'static str],
    problems: &mut Vec<ConfigProblem>,
) -> Section<'a> {
    let keys = KeySchema {
        keys: schema,
        repeatable: REPEATABLE_KEYS,
    };
    Section::keyed(
        label,
        raws,
        keys,
        |key| unknown_key_hint(key, schema),
        problems,
    )
}

/// Where an unknown `key` belongs, if anywhere.
fn unknown_key_hint(key: &str, schema: &[&str]) -> String {
    let is = |keys: &[&str]| keys.iter().any(|k| k.eq_ignore_ascii_case(key));
    if is(REMOVED_KEYS) {
        " (upstream no longer reads it; delete it)"
    } else if schema == GLOBAL_KEYS && is(OVERRIDE_KEYS) {
        " (it belongs in a [ServiceOverride \"name\"] section)"
    } else if schema == OVERRIDE_KEYS && is(GLOBAL_KEYS) {
        " (it belongs in [Global])"
    } else {
        ""
    }
    .to_string()
}

/// The `[Global]` section, defaults filled in.
fn global_config(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> GlobalConfig {
    let region = s.checked("Region", problems, region_value);
    let zone = s.checked("Zone", problems, zone_value);
    check_zone_in_region(s, zone.as_deref(), region.as_deref(), problems);
    let kubernetes_cluster_tag = s.string("KubernetesClusterTag", problems);
    let kubernetes_cluster_id = s.string("KubernetesClusterID", problems);
    check_cluster_ids_agree(s, &kubernetes_cluster_tag, &kubernetes_cluster_id, problems);
    GlobalConfig {
        zone,
        region,
        vpc: s.string("VPC", problems),
        subnet_id: s.string("SubnetID", problems),
        route_table_id: s.string("RouteTableID", problems),
        role_arn: s.string("RoleARN", problems),
        source_arn: s.string("SourceARN", problems),
        kubernetes_cluster_tag,
        kubernetes_cluster_id,
        disable_security_group_ingress: s.boolean("DisableSecurityGroupIngress", problems),
        elb_security_group: s.string("ElbSecurityGroup", problems),
        node_ip_families: ip_families(s, problems),
        health_probe_mode: s
            .checked("ClusterServiceLoadBalancerHealthProbeMode", problems, |v| {
                enum_value(
                    v,
                    &[
                        ("ServiceNodePort", HealthProbeMode::ServiceNodePort),
                        ("Shared", HealthProbeMode::Shared),
                    ],
                )
            })
            .unwrap_or_default(),
        shared_health_probe_port: s
            .checked(
                "ClusterServiceSharedLoadBalancerHealthProbePort",
                problems,
                |v| parse_port(v).map_err(|m| format!("the value {m}")),
            )
            .filter(|port| *port != 0)
            .unwrap_or(DEFAULT_SHARED_HEALTH_PROBE_PORT),
        shared_health_probe_path: s
            .checked(
                "ClusterServiceSharedLoadBalancerHealthProbePath",
                problems,
                |v| match check_probe_path(v) {
                    Ok(()) => Ok(v.to_owned()),
                    Err(m) => Err(format!("the path {m}")),
                },
            )
            .unwrap_or_else(|| DEFAULT_SHARED_HEALTH_PROBE_PATH.to_owned()),
        supported_topology_instance_type_pattern: s.checked(
            "SupportedTopologyInstanceTypePattern",
            problems,
            |v| check_pattern(v).map(|()| v.to_owned()),
        ),
        nlb_security_group_mode: s.checked("NLBSecurityGroupMode", problems, |v| {
            enum_value(v, &[("Managed", NlbSecurityGroupMode::Managed)])
        }),
        public_network_allow_list: s
            .checked("PublicNetworkAllowList", problems, allow_list_value)
            .unwrap_or_default(),
    }
}

/// `PublicNetworkAllowList`: CIDRs separated by commas (spaces around them ignored), as
/// Deckhouse writes it from the cluster's `publicNetworkAllowList`.
fn allow_list_value(v: &str) -> Result<Vec<String>, String> {
    let cidrs: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(n) = cidrs
        .iter()
        .position(|c| stratus_cloud::Cidr::parse(c).is_err())
    {
        return Err(format!(
            "entry {} is not a CIDR (expected CIDRs separated by commas, e.g. 203.0.113.0/24,198.51.100.0/24)",
            n + 1
        ));
    }
    let max = stratus_aws_api::sg_rules::MAX_SOURCE_RANGES;
    if cidrs.len() > max {
        return Err(format!(
            "{} ranges given, at most {max} (each is a rule in the node security groups)",
            cidrs.len()
        ));
    }
    Ok(cidrs)
}

/// A region name.
fn region_value(v: &str) -> Result<String, String> {
    if is_region(v) {
        Ok(v.to_owned())
    } else {
        Err("not a valid AWS region name (e.g. us-east-1)".to_owned())
    }
}

/// A zone name.
fn zone_value(v: &str) -> Result<String, String> {
    if zone_region(v).is_some() {
        Ok(v.to_owned())
    } else {
        Err(
            "not a valid AWS availability zone name (a region followed by a zone letter, e.g. us-east-1a)"
                .to_owned(),
        )
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
        let message = "the zone is not in the Region of [Global]";
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
            let message = "differs from KubernetesClusterID; they must match when both are set";
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
    let service = s.required("Service", problems);
    let region = s.required("Region", problems);
    let url = s
        .required("URL", problems)
        .and_then(|(url, line)| match check_endpoint_url(&url) {
            Ok(()) => Some(url),
            Err(reason) => {
                // Never echoed: a URL with user info may hold a password.
                problems.push(s.problem("URL", Some(line), format!("the URL {reason}")));
                None
            }
        });
    let signing_region = s.required("SigningRegion", problems);
    let signing_method = s.string("SigningMethod", problems);
    let signing_name = s.string("SigningName", problems);
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
                    "this service is already overridden in this region by [{}]",
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
