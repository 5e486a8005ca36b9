//! Tests of the whole cloud config: full configs, each class of problem, and properties.

use super::*;
use proptest::prelude::*;
use stratus_cloud_kit::gcfg::ConfigProblem;

/// Parses text that must be valid.
fn ok(text: &str) -> CloudConfig {
    CloudConfig::parse(text).unwrap_or_else(|e| panic!("{e}\n--- config ---\n{text}"))
}

/// Parses text that must be invalid, returning its problems.
fn problems(text: &str) -> Vec<ConfigProblem> {
    match CloudConfig::parse(text) {
        Ok(c) => panic!("expected problems, parsed {c:#?}\n--- config ---\n{text}"),
        Err(e) => e.0,
    }
}

/// A valid override section body to build on.
const OVERRIDE: &str =
    "Service = ec2\nRegion = us-east-1\nURL = https://ec2.example\nSigningRegion = us-east-1\n";

#[test]
fn full_config_with_every_key_parses_to_the_expected_struct() {
    let text = r#"
; AWS cloud config, every key
# with both comment styles
[global]
Zone = us-west-2a            ; inline comment
region = "us-west-2"
VPC = vpc-0123456789abcdef0
SubnetID = subnet-0123
RouteTableID = rtb-0123
RoleARN = "arn:aws:iam::123456789012:role/ccm"
SourceARN = arn:aws:eks:us-west-2:123456789012:cluster/prod
KubernetesClusterTag = prod
KUBERNETESCLUSTERID = prod
DisableSecurityGroupIngress = Yes
ElbSecurityGroup = sg-0abc
NodeIPFamilies = ipv6
nodeipfamilies = "ipv4"
ClusterServiceLoadBalancerHealthProbeMode = Shared
ClusterServiceSharedLoadBalancerHealthProbePort = 10257
ClusterServiceSharedLoadBalancerHealthProbePath = "/livez;#kept"
SupportedTopologyInstanceTypePattern = "^(p4d|trn1)\\..*$" ; gcfg needs \\ for a backslash
NLBSecurityGroupMode = Managed
PublicNetworkAllowList = 203.0.113.0/24

[ServiceOverride "1"]
Service = EC2
Region = us-west-2
URL = https://ec2.vpce.example.internal
SigningRegion = us-west-2
SigningMethod = v4
SigningName = ec2

[serviceoverride "elb"]
service = elasticloadbalancing
REGION = us-west-2
url = "http://localhost:4566/"   # a local emulator
signingregion = us-west-2
"#;
    let expected = CloudConfig {
        global: GlobalConfig {
            zone: Some("us-west-2a".into()),
            region: Some("us-west-2".into()),
            vpc: Some("vpc-0123456789abcdef0".into()),
            subnet_id: Some("subnet-0123".into()),
            route_table_id: Some("rtb-0123".into()),
            role_arn: Some("arn:aws:iam::123456789012:role/ccm".into()),
            source_arn: Some("arn:aws:eks:us-west-2:123456789012:cluster/prod".into()),
            kubernetes_cluster_tag: Some("prod".into()),
            kubernetes_cluster_id: Some("prod".into()),
            disable_security_group_ingress: true,
            elb_security_group: Some("sg-0abc".into()),
            node_ip_families: vec![IpFamily::Ipv6, IpFamily::Ipv4],
            health_probe_mode: HealthProbeMode::Shared,
            shared_health_probe_port: 10257,
            shared_health_probe_path: "/livez;#kept".into(),
            supported_topology_instance_type_pattern: Some(r"^(p4d|trn1)\..*$".into()),
            nlb_security_group_mode: Some(NlbSecurityGroupMode::Managed),
            public_network_allow_list: vec!["203.0.113.0/24".into()],
        },
        service_overrides: vec![
            ServiceOverride {
                name: "1".into(),
                service: "ec2".into(),
                region: "us-west-2".into(),
                url: "https://ec2.vpce.example.internal".into(),
                signing_region: "us-west-2".into(),
                signing_method: Some("v4".into()),
                signing_name: Some("ec2".into()),
            },
            ServiceOverride {
                name: "elb".into(),
                service: "elasticloadbalancing".into(),
                region: "us-west-2".into(),
                url: "http://localhost:4566/".into(),
                signing_region: "us-west-2".into(),
                signing_method: None,
                signing_name: None,
            },
        ],
    };
    let config = ok(text);
    assert_eq!(config, expected);
    assert_eq!(config.region().as_deref(), Some("us-west-2"));
    assert_eq!(config.cluster_id(), Some("prod"));
    assert!(config.uses_legacy_cluster_tag());
}

/// The cloud config exactly as Deckhouse's AWS module renders it for a cluster with a
/// `publicNetworkAllowList` (lower-case first letter, values quoted, joined by commas).
#[test]
fn deckhouse_rendering_with_a_public_network_allow_list_parses() {
    let text = "[Global]\nKubernetesClusterID = \"4b7a1f52-0c1e-4d5e-9a57-0d3f6c1e8b21\"\n\
                ElbSecurityGroup = \"sg-0123456789abcdef0\"\n\
                publicNetworkAllowList = \"198.51.100.0/24, 203.0.113.7/32\"\n";
    let config = ok(text);
    assert_eq!(
        config.global.public_network_allow_list,
        vec!["198.51.100.0/24".to_string(), "203.0.113.7/32".to_string()]
    );
    assert_eq!(
        config.cluster_id(),
        Some("4b7a1f52-0c1e-4d5e-9a57-0d3f6c1e8b21")
    );
    assert_eq!(
        config.global.elb_security_group.as_deref(),
        Some("sg-0123456789abcdef0")
    );
    // A bad entry is named by its place, never echoed.
    let found = problems("[Global]\npublicNetworkAllowList = \"198.51.100.0/24,secret-ish\"\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].key.as_deref(), Some("PublicNetworkAllowList"));
    assert!(found[0].message.contains("entry 2"), "{found:?}");
    assert!(!found[0].message.contains("secret-ish"), "{found:?}");
}

#[test]
fn empty_text_means_defaults() {
    for text in ["", "\n\n", "; only a comment\n# another\n", "[Global]\n"] {
        let config = ok(text);
        assert_eq!(config, CloudConfig::default(), "{text:?}");
    }
    let g = GlobalConfig::default();
    assert_eq!(g.node_ip_families, vec![IpFamily::Ipv4]);
    assert_eq!(g.health_probe_mode, HealthProbeMode::ServiceNodePort);
    assert_eq!(g.shared_health_probe_port, 10256);
    assert_eq!(g.shared_health_probe_path, "/healthz");
    assert!(!g.disable_security_group_ingress);
    assert_eq!(CloudConfig::default().region(), None);
    assert_eq!(CloudConfig::default().cluster_id(), None);
}

#[test]
fn empty_values_count_as_not_set() {
    let config = ok("[Global]\nZone =\nRegion = \"\"\nClusterServiceSharedLoadBalancerHealthProbePort = 0\nClusterServiceLoadBalancerHealthProbeMode =\nNLBSecurityGroupMode =\n");
    assert_eq!(config, CloudConfig::default());
}

#[test]
fn region_comes_from_region_else_from_zone() {
    let cases = [
        ("Zone = us-east-1a", Some("us-east-1")),
        ("Zone = ap-southeast-4c", Some("ap-southeast-4")),
        ("Zone = us-gov-west-1b", Some("us-gov-west-1")),
        ("Zone = us-west-2-lax-1a", Some("us-west-2")),
        ("Zone = eu-west-1a\nRegion = eu-west-1", Some("eu-west-1")),
        ("Region = eu-west-3", Some("eu-west-3")),
        ("VPC = vpc-1", None),
    ];
    for (body, want) in cases {
        let config = ok(&format!("[Global]\n{body}\n"));
        assert_eq!(config.region().as_deref(), want, "{body}");
    }
}

#[test]
fn cluster_id_prefers_the_new_key() {
    let cases = [
        ("KubernetesClusterID = a", Some("a"), false),
        ("KubernetesClusterTag = b", Some("b"), true),
        (
            "KubernetesClusterID = c\nKubernetesClusterTag = c",
            Some("c"),
            true,
        ),
        ("", None, false),
    ];
    for (body, want, legacy) in cases {
        let config = ok(&format!("[Global]\n{body}\n"));
        assert_eq!(config.cluster_id(), want, "{body}");
        assert_eq!(config.uses_legacy_cluster_tag(), legacy, "{body}");
    }
}

#[test]
fn vpc_and_subnet_are_independent() {
    assert_eq!(ok("[Global]\nVPC = vpc-1\n").global.subnet_id, None);
    assert_eq!(ok("[Global]\nSubnetID = subnet-1\n").global.vpc, None);
}

#[test]
fn booleans_take_every_gcfg_spelling() {
    let cases = [
        ("DisableSecurityGroupIngress", true),
        ("DisableSecurityGroupIngress ; bare key", true),
        ("DisableSecurityGroupIngress = TRUE", true),
        ("DisableSecurityGroupIngress = on", true),
        ("DisableSecurityGroupIngress = 1", true),
        ("DisableSecurityGroupIngress = no", false),
        ("DisableSecurityGroupIngress = Off", false),
        ("DisableSecurityGroupIngress = \"0\"", false),
        ("DisableSecurityGroupIngress = false", false),
    ];
    for (line, want) in cases {
        let config = ok(&format!("[Global]\n{line}\n"));
        assert_eq!(config.global.disable_security_group_ingress, want, "{line}");
    }
}

#[test]
fn node_ip_families_repeat_and_a_bare_key_resets_them() {
    let fams = |body: &str| ok(&format!("[Global]\n{body}\n")).global.node_ip_families;
    assert_eq!(fams("NodeIPFamilies = ipv6"), vec![IpFamily::Ipv6]);
    assert_eq!(
        fams("NodeIPFamilies = ipv4\nNodeIPFamilies = ipv6"),
        vec![IpFamily::Ipv4, IpFamily::Ipv6]
    );
    assert_eq!(
        fams("NodeIPFamilies = ipv4\nNodeIPFamilies\nNodeIPFamilies = ipv6"),
        vec![IpFamily::Ipv6]
    );
    assert_eq!(
        fams("NodeIPFamilies = ipv6\nNodeIPFamilies"),
        vec![IpFamily::Ipv4]
    );
}

#[test]
fn port_accepts_gcfg_hex() {
    let config = ok("[Global]\nClusterServiceSharedLoadBalancerHealthProbePort = 0x2811\n");
    assert_eq!(config.global.shared_health_probe_port, 10257);
}

#[test]
fn endpoint_override_matches_services_by_alias_and_case() {
    let text = format!(
        "[ServiceOverride \"1\"]\n{OVERRIDE}\n[ServiceOverride \"2\"]\nService = elb\nRegion = us-east-1\nURL = https://elb.example\nSigningRegion = us-east-1\nSigningName = elasticloadbalancing\n\n[ServiceOverride \"3\"]\nService = Elastic Load Balancing v2\nRegion = eu-west-1\nURL = https://elbv2.example\nSigningRegion = eu-west-1\n"
    );
    let config = ok(&text);
    let name = |service: &str, region: &str| {
        config
            .endpoint_override(service, region)
            .map(|o| o.name.as_str())
    };
    assert_eq!(name("ec2", "us-east-1"), Some("1"));
    assert_eq!(name("EC2", "us-east-1"), Some("1"));
    assert_eq!(name("ec2", "us-west-2"), None);
    assert_eq!(name("elasticloadbalancing", "us-east-1"), Some("2"));
    assert_eq!(name("Elastic Load Balancing", "us-east-1"), Some("2"));
    assert_eq!(name("ELB", "us-east-1"), Some("2"));
    assert_eq!(name("elbv2", "eu-west-1"), Some("3"));
    assert_eq!(name("elbv2", "us-east-1"), None);
    assert_eq!(name("kms", "us-east-1"), None);
    assert_eq!(
        config.service_overrides[2].service,
        "elastic load balancing v2"
    );
}

#[test]
fn override_sections_with_the_same_name_merge_and_an_unnamed_one_is_allowed() {
    let config = ok("[ServiceOverride \"a\"]\nService = ec2\nRegion = us-east-1\n[Global]\nZone = us-east-1a\n[ServiceOverride \"a\"]\nURL = https://x\nSigningRegion = us-east-1\n[ServiceOverride]\nService = kms\nRegion = us-east-1\nURL = https://kms.example\nSigningRegion = us-east-1\n");
    assert_eq!(config.service_overrides.len(), 2);
    assert_eq!(config.service_overrides[0].url, "https://x");
    assert_eq!(config.service_overrides[1].name, "");
}

/// One case of the problem table: config text and what its single problem must say.
struct Case {
    name: &'static str,
    text: String,
    section: Option<&'static str>,
    key: Option<&'static str>,
    line: usize,
    contains: &'static [&'static str],
}

fn case(
    name: &'static str,
    text: impl Into<String>,
    section: Option<&'static str>,
    key: Option<&'static str>,
    line: usize,
    contains: &'static [&'static str],
) -> Case {
    Case {
        name,
        text: text.into(),
        section,
        key,
        line,
        contains,
    }
}

fn global(body: &str) -> String {
    format!("[Global]\n{body}\n")
}

fn service_override(body: &str) -> String {
    format!("[ServiceOverride \"1\"]\n{body}\n")
}

const G: Option<&str> = Some("Global");
const SO: Option<&str> = Some("ServiceOverride \"1\"");

#[test]
fn each_class_of_problem_is_reported() {
    let cases = vec![
        case("unknown section", "[Globall]\nZone = x", Some("Globall"), None, 1, &["unknown section", "[Global]"]),
        case("unknown section with name", "[Foo \"bar\"]", Some("Foo \"bar\""), None, 1, &["unknown section"]),
        case("global with a name", "[Global \"x\"]\nZone = us-east-1a", Some("Global \"x\""), None, 1, &["takes no name"]),
        case("unknown global key", global("Regoin = us-east-1"), G, Some("Regoin"), 2, &["unknown key", "valid keys are Zone, Region, VPC", "NLBSecurityGroupMode"]),
        case("override key in global", global("URL = https://x"), G, Some("URL"), 2, &["belongs in a [ServiceOverride"]),
        case("removed key", global("DisableStrictZoneCheck = true"), G, Some("DisableStrictZoneCheck"), 2, &["no longer reads it"]),
        case("unknown override key", format!("[ServiceOverride \"1\"]\n{OVERRIDE}Endpoint = x"), SO, Some("Endpoint"), 6, &["valid keys are Service, Region, URL, SigningRegion, SigningMethod, SigningName"]),
        case("global key in override", format!("[ServiceOverride \"1\"]\n{OVERRIDE}Zone = x"), SO, Some("Zone"), 6, &["belongs in [Global]"]),
        case("invalid bool", global("DisableSecurityGroupIngress = maybe"), G, Some("DisableSecurityGroupIngress"), 2, &["not a boolean"]),
        case("empty bool", global("DisableSecurityGroupIngress ="), G, Some("DisableSecurityGroupIngress"), 2, &["not a boolean"]),
        case("invalid region", global("Region = moon-1"), G, Some("Region"), 2, &["not a valid AWS region name"]),
        case("zone as region", global("Region = us-east-1a"), G, Some("Region"), 2, &["not a valid AWS region name"]),
        case("invalid zone", global("Zone = us-east-1"), G, Some("Zone"), 2, &["not a valid AWS availability zone name"]),
        case("zone outside region", global("Region = us-east-1\nZone = us-west-2a"), G, Some("Zone"), 3, &["the zone is not in the Region"]),
        case("invalid family", global("NodeIPFamilies = ipv5"), G, Some("NodeIPFamilies"), 2, &["not one of ipv4, ipv6"]),
        case("family case", global("NodeIPFamilies = IPv6"), G, Some("NodeIPFamilies"), 2, &["case-sensitive: write ipv6"]),
        case("family list", global("NodeIPFamilies = ipv4,ipv6"), G, Some("NodeIPFamilies"), 2, &["one family per line"]),
        case("empty family", global("NodeIPFamilies ="), G, Some("NodeIPFamilies"), 2, &["not one of"]),
        case("duplicate family", global("NodeIPFamilies = ipv4\nNodeIPFamilies = ipv6\nNodeIPFamilies = ipv4"), G, Some("NodeIPFamilies"), 4, &["ipv4 is listed more than once"]),
        case("invalid probe mode", global("ClusterServiceLoadBalancerHealthProbeMode = Both"), G, Some("ClusterServiceLoadBalancerHealthProbeMode"), 2, &["not one of ServiceNodePort, Shared"]),
        case("probe mode case", global("ClusterServiceLoadBalancerHealthProbeMode = shared"), G, Some("ClusterServiceLoadBalancerHealthProbeMode"), 2, &["write Shared"]),
        case("invalid nlb mode", global("NLBSecurityGroupMode = managed"), G, Some("NLBSecurityGroupMode"), 2, &["not one of Managed", "write Managed"]),
        case("port not a number", global("ClusterServiceSharedLoadBalancerHealthProbePort = http"), G, Some("ClusterServiceSharedLoadBalancerHealthProbePort"), 2, &["is not a port number"]),
        case("port too big", global("ClusterServiceSharedLoadBalancerHealthProbePort = 70000"), G, Some("ClusterServiceSharedLoadBalancerHealthProbePort"), 2, &["is not a port"]),
        case("negative port", global("ClusterServiceSharedLoadBalancerHealthProbePort = -1"), G, Some("ClusterServiceSharedLoadBalancerHealthProbePort"), 2, &["not a port"]),
        case("relative path", global("ClusterServiceSharedLoadBalancerHealthProbePath = healthz"), G, Some("ClusterServiceSharedLoadBalancerHealthProbePath"), 2, &["must start with '/'"]),
        case("bad regex", global("SupportedTopologyInstanceTypePattern = \"^(p4d\""), G, Some("SupportedTopologyInstanceTypePattern"), 2, &["not a valid regular expression", "unclosed group"]),
        case("cluster ids differ", global("KubernetesClusterID = a\nKubernetesClusterTag = b"), G, Some("KubernetesClusterTag"), 3, &["differs from KubernetesClusterID"]),
        case("string without value", global("Region"), G, Some("Region"), 2, &["needs a value"]),
        case("duplicated key", global("Region = us-east-1\nregion = us-east-2"), G, Some("Region"), 3, &["set more than once (first on line 2)"]),
        case("duplicated key across sections", "[Global]\nVPC = a\n[Global]\nVPC = b", G, Some("VPC"), 4, &["first on line 2"]),
        case("override without Service", service_override("Region = r\nURL = https://x\nSigningRegion = r"), SO, Some("Service"), 1, &["is required but missing"]),
        case("override without Region", service_override("Service = ec2\nURL = https://x\nSigningRegion = r"), SO, Some("Region"), 1, &["is required"]),
        case("override with empty URL", service_override("Service = ec2\nRegion = r\nURL = \"  \"\nSigningRegion = r"), SO, Some("URL"), 4, &["is required but empty"]),
        case("override without SigningRegion", service_override("Service = ec2\nRegion = r\nURL = https://x"), SO, Some("SigningRegion"), 1, &["is required"]),
        case("override URL scheme", service_override("Service = ec2\nRegion = r\nURL = ftp://x\nSigningRegion = r"), SO, Some("URL"), 4, &["the URL must use the http or https scheme"]),
        case("override URL without host", service_override("Service = ec2\nRegion = r\nURL = https:///x\nSigningRegion = r"), SO, Some("URL"), 4, &["must name a host"]),
        case("override URL not absolute", service_override("Service = ec2\nRegion = r\nURL = ec2.example\nSigningRegion = r"), SO, Some("URL"), 4, &["must be an absolute"]),
        case("duplicate override", format!("[ServiceOverride \"1\"]\n{OVERRIDE}[ServiceOverride \"2\"]\nService = EC2\nRegion = us-east-1\nURL = https://b\nSigningRegion = us-east-1"), Some("ServiceOverride \"2\""), Some("Service"), 7, &["already overridden in this region by [ServiceOverride \"1\"]"]),
        case("duplicate override by alias", "[ServiceOverride \"a\"]\nService = elb\nRegion = r\nURL = https://a\nSigningRegion = r\n[ServiceOverride \"b\"]\nService = elasticloadbalancing\nRegion = r\nURL = https://b\nSigningRegion = r", Some("ServiceOverride \"b\""), Some("Service"), 7, &["already overridden in this region by [ServiceOverride \"a\"]"]),
        case("malformed header", "[Global\nZone = us-east-1a", None, None, 1, &["malformed section header", "expected ']'"]),
        case("malformed line", "[Global]\n\n\"Zone\" = x", None, None, 3, &["malformed line"]),
        case("missing equals", global("Zone us-east-1a"), None, None, 2, &["no '='"]),
        case("unterminated quote", global("Zone = \"us-east-1a"), None, Some("Zone"), 2, &["unterminated quoted value"]),
        case("bad escape", global("Zone = \"us\\x\""), None, Some("Zone"), 2, &["unknown escape sequence \\x"]),
        case("unquoted backslash", global("Zone = us\\x"), None, Some("Zone"), 2, &["outside quotes must end the line"]),
        case("key before any section", "Zone = us-east-1a\n[Global]", None, None, 1, &["outside of any section"]),
    ];
    for c in cases {
        let found = problems(&c.text);
        assert_eq!(found.len(), 1, "{}: {found:#?}", c.name);
        let p = &found[0];
        assert_eq!(p.section.as_deref(), c.section, "{}: {p}", c.name);
        assert_eq!(p.key.as_deref(), c.key, "{}: {p}", c.name);
        assert_eq!(p.line, Some(c.line), "{}: {p}", c.name);
        for needle in c.contains {
            assert!(
                p.message.contains(needle),
                "{}: {p:?} lacks {needle:?}",
                c.name
            );
        }
    }
}

#[test]
fn problem_display_names_section_key_and_line() {
    let err = CloudConfig::parse("[Global]\nRegion = moon-1\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid cloud config:\n  [Global] Region: not a valid AWS region name (e.g. us-east-1) (line 2)"
    );
}

#[test]
fn four_problems_are_reported_together() {
    let text = "[Global]\nRegion = moon-1\nDisableSecurityGroupIngress = sometimes\nColour = blue\n[Nope]\n";
    let err = CloudConfig::parse(text).unwrap_err();
    let lines: Vec<_> = err.0.iter().map(|p| p.line).collect();
    assert_eq!(lines, vec![Some(2), Some(3), Some(4), Some(5)], "{err}");
    let shown = err.to_string();
    assert_eq!(shown.lines().count(), 5, "{shown}");
    for needle in ["Region", "DisableSecurityGroupIngress", "Colour", "[Nope]"] {
        assert!(shown.contains(needle), "{shown}");
    }
}

#[test]
fn syntax_and_semantic_problems_are_reported_together_in_line_order() {
    let text = format!("[Global]\nZone = \"open\nRegion = mars-north-1x\n[ServiceOverride \"1\"]\nService = ec2\n[Bad\n{OVERRIDE}");
    let found = problems(&text);
    let lines: Vec<_> = found.iter().map(|p| p.line).collect();
    // line 2 unterminated quote, line 3 region, line 4 the override misses keys (its other
    // keys sit under the malformed header on line 6 and are dropped), line 6 header.
    assert_eq!(
        lines,
        vec![Some(2), Some(3), Some(4), Some(4), Some(4), Some(6)],
        "{found:#?}"
    );
}

#[test]
fn long_values_are_truncated_in_messages() {
    let long = "x".repeat(5000);
    let err = CloudConfig::parse(&format!("[Global]\nRegion = {long}\nZone = {long}\nNodeIPFamilies = {long}\nSupportedTopologyInstanceTypePattern = ({long}\n[ServiceOverride \"{long}\"]\nURL = ftp://{long}\n[{long}]\n{long} = 1")).unwrap_err();
    let shown = err.to_string();
    assert!(!shown.contains(&"x".repeat(201)), "{shown}");
    assert!(shown.lines().all(|l| l.chars().count() < 1000), "{shown}");
}

/// Every key of every section, given a value that cannot be right (and a secret in it), an unknown
/// key with the secret as its value, and a line of secret before any section: no problem quotes it.
#[test]
fn no_problem_quotes_a_value() {
    const SECRET: &str = "tok-7f3a9c-SECRET";
    let value = format!("\"{SECRET} \\\" {SECRET}\"");
    let mut text = format!("{SECRET}\n{SECRET} = {SECRET}\n[Global]\n");
    for key in super::validate::GLOBAL_KEYS {
        text.push_str(&format!("{key} = {value}\n{key} = {SECRET}\n"));
    }
    text.push_str(&format!("Unknown = {value}\n[ServiceOverride \"a\"]\n"));
    for key in super::validate::OVERRIDE_KEYS {
        text.push_str(&format!("{key} = {value}\n"));
    }
    text.push_str(&format!(
        "[ServiceOverride \"b\"]\nURL = https://{SECRET}:{SECRET}@x\n"
    ));
    let err = CloudConfig::parse(&text).unwrap_err();
    assert!(err.0.len() > 10, "{err}");
    for problem in &err.0 {
        let shown = problem.to_string();
        assert!(!shown.contains("7f3a9c"), "{shown}");
    }
}

#[test]
fn url_credentials_are_never_echoed() {
    let found = problems(&service_override(
        "Service = ec2\nRegion = r\nURL = https://admin:hunter2@ec2.example\nSigningRegion = r",
    ));
    let shown = found[0].to_string();
    assert!(
        shown.contains("must not contain user credentials"),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[test]
fn load_reads_a_file_and_names_the_path_when_it_cannot() {
    let dir = std::env::temp_dir().join(format!("stratus-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cloud.conf");
    std::fs::write(&path, "[Global]\nZone = eu-west-1b\n").unwrap();
    assert_eq!(
        CloudConfig::load(&path).unwrap().region().as_deref(),
        Some("eu-west-1")
    );
    let missing = dir.join("missing.conf");
    let err = CloudConfig::load(&missing).unwrap_err();
    assert_eq!(err.0.len(), 1);
    let shown = err.to_string();
    assert!(shown.contains(&missing.display().to_string()), "{shown}");
    assert!(shown.contains("No such file"), "{shown}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- properties ----

/// A generated valid `[Global]` section and what parsing it must yield.
#[derive(Debug, Clone)]
struct Generated {
    region: String,
    zone: String,
    write_region: bool,
    cluster_id: String,
    legacy: bool,
    families: Vec<IpFamily>,
    quote: bool,
    key_case: u8,
}

fn region_strategy() -> impl Strategy<Value = String> {
    let prefixes = vec![
        "us", "eu", "ap", "sa", "ca", "me", "af", "il", "mx", "cn", "us-gov", "us-iso", "us-isob",
        "eu-isoe", "us-isof", "eusc-de",
    ];
    let directions = vec![
        "east",
        "west",
        "north",
        "south",
        "central",
        "northeast",
        "northwest",
        "southeast",
        "southwest",
    ];
    (
        prop::sample::select(prefixes),
        prop::sample::select(directions),
        1u8..=19,
    )
        .prop_map(|(p, d, n)| format!("{p}-{d}-{n}"))
}

fn zone_suffix_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-f]{1,2}",
        ("[a-z]{3}", 1u8..=9, "[a-c]").prop_map(|(city, n, l)| format!("-{city}-{n}{l}")),
    ]
}

fn generated_strategy() -> impl Strategy<Value = Generated> {
    (
        region_strategy(),
        zone_suffix_strategy(),
        any::<bool>(),
        "[a-z0-9][a-z0-9._-]{0,40}",
        any::<bool>(),
        prop::sample::subsequence(vec![IpFamily::Ipv4, IpFamily::Ipv6], 1..=2).prop_shuffle(),
        any::<bool>(),
        0u8..3,
    )
        .prop_map(
            |(region, suffix, write_region, cluster_id, legacy, families, quote, key_case)| {
                Generated {
                    zone: format!("{region}{suffix}"),
                    region,
                    write_region,
                    cluster_id,
                    legacy,
                    families,
                    quote,
                    key_case,
                }
            },
        )
}

impl Generated {
    fn key(&self, key: &str) -> String {
        match self.key_case {
            0 => key.to_owned(),
            1 => key.to_lowercase(),
            _ => key.to_uppercase(),
        }
    }

    fn value(&self, value: &str) -> String {
        if self.quote {
            format!("\"{value}\"")
        } else {
            value.to_owned()
        }
    }

    fn render(&self) -> String {
        let mut text = String::from("[global] ; generated\n");
        let mut line = |key: &str, value: &str| {
            text.push_str(&format!("{} = {}\n", self.key(key), self.value(value)));
        };
        line("Zone", &self.zone);
        if self.write_region {
            line("Region", &self.region);
        }
        let id_key = if self.legacy {
            "KubernetesClusterTag"
        } else {
            "KubernetesClusterID"
        };
        line(id_key, &self.cluster_id);
        for family in &self.families {
            line("NodeIPFamilies", family.as_str());
        }
        text
    }
}

/// Strings made of INI-significant tokens, to reach deep into the lexer.
fn ini_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just("=".to_owned()),
        Just(";".to_owned()),
        Just("#".to_owned()),
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just(" ".to_owned()),
        Just("Global".to_owned()),
        Just("ServiceOverride".to_owned()),
        Just("Region".to_owned()),
        Just("Zone".to_owned()),
        Just("NodeIPFamilies".to_owned()),
        Just("URL".to_owned()),
        Just("us-east-1".to_owned()),
        "[a-z0-9:/.-]{1,6}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(token, 0..80).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
        if let Err(e) = CloudConfig::parse(&text) {
            prop_assert!(!e.0.is_empty());
            let _ = e.to_string();
        }
    }

    #[test]
    fn parse_never_panics_on_ini_like_text(text in ini_soup()) {
        match CloudConfig::parse(&text) {
            Ok(config) => { let _ = (config.region(), config.cluster_id()); }
            Err(e) => {
                prop_assert!(!e.0.is_empty());
                for line in e.to_string().lines() {
                    prop_assert!(line.chars().count() < 2000);
                }
            }
        }
    }

    #[test]
    fn generated_valid_configs_parse_to_their_values(g in generated_strategy()) {
        let text = g.render();
        let config = CloudConfig::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(config.global.zone.as_deref(), Some(g.zone.as_str()));
        prop_assert_eq!(config.global.region.is_some(), g.write_region);
        prop_assert_eq!(config.region(), Some(g.region.clone()));
        prop_assert_eq!(config.cluster_id(), Some(g.cluster_id.as_str()));
        prop_assert_eq!(config.uses_legacy_cluster_tag(), g.legacy);
        prop_assert_eq!(&config.global.node_ip_families, &g.families);
        prop_assert!(config.service_overrides.is_empty());
    }
}
