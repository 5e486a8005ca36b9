//! Table tests of the cloud.conf parser: every section, clouds.yaml, and one message listing
//! every problem with its line.

use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(text: &str) -> Result<OpenStackConfig, ConfigErrors> {
    OpenStackConfig::parse_with(
        text,
        &|_: &Path| Err(std::io::ErrorKind::NotFound.into()),
        &|_| None,
    )
}

fn problems(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect()
}

const MINIMAL: &str = "[Global]\nauth-url = https://keystone:5000/v3\nusername = ccm\npassword = s3cret\ntenant-name = k8s\ndomain-name = Default\nregion = RegionOne\n";

#[test]
fn a_password_config_scopes_to_the_project_in_the_domain() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.global.auth_url, "https://keystone:5000/v3");
    assert_eq!(c.global.region.as_deref(), Some("RegionOne"));
    assert_eq!(c.global.interface, Interface::Public);
    assert_eq!(
        c.global.credentials,
        Credentials::Password {
            user: Named::Name("ccm".into()),
            user_domain: Some(Named::Name("Default".into())),
            password: Secret::new("s3cret"),
            project: Named::Name("k8s".into()),
            project_domain: Some(Named::Name("Default".into())),
        }
    );
    assert_eq!(c.load_balancer, LoadBalancerConfig::default());
    assert_eq!(c.metadata.request_timeout, Duration::from_secs(60));
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "secrets are never printed"
    );
}

#[test]
fn every_section_is_read() {
    let text = format!(
        "{MINIMAL}os-endpoint-type = internalURL\ntls-insecure = true\n\
         [Networking]\npublic-network-name = public\npublic-network-name = ext2\ninternal-network-name = k8s\nipv6-support-disabled = yes\naddress-sort-order = 10.0.0.0/8, 192.168.0.0/16\n\
         [LoadBalancer]\nlb-method = SOURCE_IP\nlb-provider = ovn\nfloating-network-id = fn-1\ncreate-monitor = true\nmonitor-delay = 10s\nmonitor-timeout = 4s\nmax-shared-lb = 5\nnode-selector = a=b, c\n\
         [LoadBalancerClass \"ext\"]\nfloating-network-id = fn-2\nsubnet-id = s-2\n\
         [Route]\nrouter-id = r-1\n\
         [Metadata]\nsearch-order = metadataService\nrequest-timeout = 20s\n\
         [BlockStorage]\nnode-volume-attach-limit = 60\nrescan-on-resize = true\n"
    );
    let c = parse(&text).unwrap();
    assert_eq!(c.global.interface, Interface::Internal);
    assert!(c.global.tls.insecure);
    assert_eq!(c.networking.public_network_names, vec!["public", "ext2"]);
    assert_eq!(c.networking.internal_network_names, vec!["k8s"]);
    assert!(c.networking.ipv6_support_disabled);
    assert_eq!(c.networking.address_sort_order.len(), 2);
    assert_eq!(c.load_balancer.lb_method, LbMethod::SourceIp);
    assert_eq!(c.load_balancer.lb_provider, "ovn");
    assert_eq!(c.load_balancer.monitor_delay, Duration::from_secs(10));
    assert_eq!(c.load_balancer.max_shared_lb, 5);
    assert_eq!(
        c.load_balancer.node_selector.get("c").map(String::as_str),
        Some("")
    );
    assert_eq!(
        c.load_balancer_classes["ext"].subnet_id.as_deref(),
        Some("s-2")
    );
    assert_eq!(c.router_id.as_deref(), Some("r-1"));
    assert_eq!(
        c.metadata.search_order,
        vec![MetadataSource::MetadataService]
    );
    assert_eq!(c.metadata.request_timeout, Duration::from_secs(20));
    assert_eq!(c.block_storage.node_volume_attach_limit, Some(60));
    assert!(c.block_storage.rescan_on_resize);
}

#[test]
fn application_credentials_need_no_project() {
    let c = parse("[Global]\nauth-url=http://k:5000/v3\napplication-credential-id = ac-1\napplication-credential-secret = shh\n").unwrap();
    assert!(matches!(
        c.global.credentials,
        Credentials::ApplicationCredential { credential: Named::Id(ref id), .. } if id == "ac-1"
    ));
}

#[test]
fn every_problem_is_listed_with_its_line() {
    let got = problems(
        "[Global]\nauth-url = keystone:5000\nusername = ccm\ntenant-name = k8s\nflavour = x\ntrust-id = t\n\
         [Networking]\naddress-sort-order = 10.0.0.0\n\
         [LoadBalancer]\nlb-method = RANDOM\nmonitor-delay = 5\nrouter-id = r\n\
         [Bogus]\n",
    );
    assert_eq!(
        got,
        vec![
            "[Global] auth-url: not an http:// or https:// URL (line 2)",
            "[Global] flavour: unknown key; valid keys are auth-url, username, user-id, password, tenant-id, tenant-name, domain-id, domain-name, tenant-domain-id, tenant-domain-name, user-domain-id, user-domain-name, region, os-endpoint-type, ca-file, cert-file, key-file, tls-insecure, use-clouds, clouds-file, cloud, application-credential-id, application-credential-name, application-credential-secret, trust-id, trustee-id, trustee-password (line 5)",
            "[Global] trust-id: trust-based authentication is not supported: use a password or an application credential (line 6)",
            "[Networking] address-sort-order: not a comma-separated list of CIDRs (want address/prefix, e.g. 10.244.0.0/16 or fd00:10:244::/56) (line 8)",
            "[LoadBalancer] lb-method: not one of ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP, SOURCE_IP_PORT (line 10)",
            "[LoadBalancer] monitor-delay: not a duration (a number with a unit: ns, us, ms, s, m or h, e.g. 5s) (line 11)",
            "[LoadBalancer] router-id: unknown key (it belongs in [Route]); valid keys are enabled, lb-version, use-octavia, subnet-id, member-subnet-id, network-id, floating-network-id, floating-subnet-id, floating-subnet, floating-subnet-tags, lb-method, lb-provider, create-monitor, monitor-delay, monitor-timeout, monitor-max-retries, monitor-max-retries-down, manage-security-groups, internal-lb, node-selector, cascade-delete, flavor-id, availability-zone, enable-ingress-hostname, ingress-hostname-suffix, max-shared-lb, container-store, provider-requires-serial-api-calls, default-tls-container-ref (line 12)",
            "[Bogus] unknown section; valid sections are [Global], [Networking], [LoadBalancer], [LoadBalancerClass \"name\"], [Route], [Metadata] and [BlockStorage] (line 13)",
        ]
    );
}

#[test]
fn incomplete_credentials_are_named() {
    let got =
        problems("[Global]\nauth-url = http://k:5000/v3\nusername = ccm\ntenant-name = k8s\n");
    assert_eq!(
        got,
        vec![
            "[Global] password: is required with username or user-id (or use application-credential-id and -secret) (line 1)",
            "[Global] username: a user given by name needs its domain (user-domain-name, user-domain-id, domain-name or domain-id) (line 3)",
            "[Global] tenant-name: a project given by name needs its domain (tenant-domain-name, tenant-domain-id, domain-name or domain-id) (line 4)",
        ]
    );
    assert_eq!(
        problems("")[0],
        "[Global] auth-url: is required (Keystone's URL, e.g. https://keystone.example:5000/v3)"
    );
}

#[test]
fn clouds_yaml_fills_what_the_file_leaves_empty() {
    let yaml = "clouds:\n  prod:\n    region_name: RegionTwo\n    interface: internal\n    auth:\n      auth_url: https://k:5000/v3\n      username: from-yaml\n      password: yaml-pass\n      project_name: p\n      user_domain_name: Default\n      project_domain_name: Default\n";
    let read = |p: &Path| {
        if p == Path::new("/etc/clouds.yaml") {
            Ok(yaml.to_string())
        } else {
            Err(std::io::ErrorKind::NotFound.into())
        }
    };
    let text = "[Global]\nuse-clouds = true\nclouds-file = /etc/clouds.yaml\ncloud = prod\nusername = from-conf\n";
    let c = OpenStackConfig::parse_with(text, &read, &|_| None).unwrap();
    assert_eq!(c.global.region.as_deref(), Some("RegionTwo"));
    assert_eq!(c.global.interface, Interface::Internal);
    match c.global.credentials {
        Credentials::Password { user, password, .. } => {
            assert_eq!(user, Named::Name("from-conf".into()), "the file wins");
            assert_eq!(password.expose(), "yaml-pass");
        }
        other => panic!("{other:?}"),
    }
    let missing = OpenStackConfig::parse_with(
        "[Global]\nuse-clouds = true\ncloud = nope\nclouds-file = /etc/clouds.yaml\n",
        &read,
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        missing.contains("cloud nope is not in /etc/clouds.yaml (clouds: prod)"),
        "{missing}"
    );
}

/// Every key of every section given a value that cannot be right (with a secret in it), an unknown
/// key holding the secret, text before any section, and a clouds.yaml that is not YAML of the
/// right shape: no problem quotes the secret.
#[test]
fn no_problem_quotes_a_value() {
    use super::validate::*;
    const SECRET: &str = "tok-7f3a9c-SECRET";
    let value = format!("\"{SECRET} \\\" {SECRET}\"");
    let mut text = format!("{SECRET}\n{SECRET} = {SECRET}\n");
    let sections: &[(&str, &[&str])] = &[
        ("Global", GLOBAL_KEYS),
        ("Networking", NETWORKING_KEYS),
        ("LoadBalancer", LOAD_BALANCER_KEYS),
        ("LoadBalancerClass \"a\"", LOAD_BALANCER_CLASS_KEYS),
        ("Route", ROUTE_KEYS),
        ("Metadata", METADATA_KEYS),
        ("BlockStorage", BLOCK_STORAGE_KEYS),
    ];
    for (section, keys) in sections {
        text.push_str(&format!("[{section}]\nunknown-key = {value}\n"));
        for key in *keys {
            text.push_str(&format!("{key} = {value}\n{key} = {SECRET}\n"));
        }
    }
    let err = parse(&text).unwrap_err();
    assert!(err.problems().len() > 20, "{err}");
    for problem in err.problems() {
        let shown = problem.to_string();
        assert!(!shown.contains("7f3a9c"), "{shown}");
    }
    let shown = err.to_string();
    assert!(shown.len() < 4096, "{}", shown.len());

    for yaml in [
        SECRET.to_string(),
        format!("clouds:\n  prod:\n    verify: {SECRET}\n"),
        format!("clouds:\n  prod:\n    auth: {SECRET}\n"),
        format!("clouds: [{SECRET}]\n"),
    ] {
        let read = |_: &Path| Ok(yaml.clone());
        let err = OpenStackConfig::parse_with(
            "[Global]\nuse-clouds = true\nclouds-file = /etc/clouds.yaml\n",
            &read,
            &|_| None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/etc/clouds.yaml is not a clouds.yaml: line "),
            "{err}"
        );
        assert!(!err.contains("7f3a9c"), "{err}");
    }
}
