//! Unit and property tests of the annotation parser: one problem per class, limits, "never panics".

use super::*;
use proptest::prelude::*;

fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
        .collect()
}

fn problems(pairs: &[(&str, &str)]) -> Vec<AnnotationProblem> {
    match parse(&ann(pairs)) {
        Ok(parsed) => panic!("expected problems for {pairs:?}, got {parsed:?}"),
        Err(AnnotationErrors(problems)) => problems,
    }
}

/// Annotations given, suffix of the one expected problem, its kind.
type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, ProblemKind);

#[test]
fn one_problem_per_class() {
    let long = "a".repeat(MAX_VALUE_CHARS + 1);
    let many_tags = (0..=MAX_TAGS)
        .map(|i| format!("k{i}=v"))
        .collect::<Vec<_>>()
        .join(",");
    let long_tag_key = format!("{}=v", "k".repeat(129));
    let long_tag_value = format!("k={}", "v".repeat(257));
    use ProblemKind::*;
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        (vec![(key::SSL_CERT, long.as_str())], key::SSL_CERT, ValueTooLong),
        (vec![(key::TYPE, "alb")], key::TYPE, InvalidValue),
        (vec![(key::SSL_CERT, "not-an-arn")], key::SSL_CERT, InvalidValue),
        (vec![(key::SSL_CERT, "arn:x"), (key::SSL_PORTS, "70000")], key::SSL_PORTS, InvalidValue),
        (vec![(key::SSL_CERT, "arn:x"), (key::SSL_PORTS, "Bad Name")], key::SSL_PORTS, InvalidValue),
        (vec![(key::SSL_CERT, "arn:x"), (key::SSL_PORTS, ",")], key::SSL_PORTS, InvalidValue),
        (vec![(key::SSL_NEGOTIATION_POLICY, " ")], key::SSL_NEGOTIATION_POLICY, InvalidValue),
        (vec![(key::BACKEND_PROTOCOL, "udp")], key::BACKEND_PROTOCOL, InvalidValue),
        (vec![(key::PROXY_PROTOCOL, "80")], key::PROXY_PROTOCOL, InvalidValue),
        (vec![(key::ACCESS_LOG_ENABLED, "yes")], key::ACCESS_LOG_ENABLED, InvalidValue),
        (vec![(key::ACCESS_LOG_EMIT_INTERVAL, "10")], key::ACCESS_LOG_EMIT_INTERVAL, InvalidValue),
        (vec![(key::ACCESS_LOG_S3_BUCKET_NAME, "")], key::ACCESS_LOG_S3_BUCKET_NAME, InvalidValue),
        (vec![(key::CONNECTION_DRAINING_ENABLED, "on")], key::CONNECTION_DRAINING_ENABLED, InvalidValue),
        (vec![(key::CONNECTION_DRAINING_TIMEOUT, "0")], key::CONNECTION_DRAINING_TIMEOUT, InvalidValue),
        (vec![(key::CONNECTION_IDLE_TIMEOUT, "4001")], key::CONNECTION_IDLE_TIMEOUT, InvalidValue),
        (vec![(key::CONNECTION_IDLE_TIMEOUT, "ten")], key::CONNECTION_IDLE_TIMEOUT, InvalidValue),
        (vec![(key::CROSS_ZONE, "maybe")], key::CROSS_ZONE, InvalidValue),
        (vec![(key::SECURITY_GROUPS, "sg-1,default")], key::SECURITY_GROUPS, InvalidValue),
        (vec![(key::EXTRA_SECURITY_GROUPS, "sg-")], key::EXTRA_SECURITY_GROUPS, InvalidValue),
        (vec![(key::HC_PROTOCOL, "UDP")], key::HC_PROTOCOL, InvalidValue),
        (vec![(key::HC_PORT, "0")], key::HC_PORT, InvalidValue),
        (vec![(key::HC_PORT, "65536")], key::HC_PORT, InvalidValue),
        (vec![(key::HC_PATH, "healthz")], key::HC_PATH, InvalidValue),
        (vec![(key::HC_HEALTHY_THRESHOLD, "11")], key::HC_HEALTHY_THRESHOLD, InvalidValue),
        (vec![(key::HC_UNHEALTHY_THRESHOLD, "1")], key::HC_UNHEALTHY_THRESHOLD, InvalidValue),
        (vec![(key::HC_TIMEOUT, "61")], key::HC_TIMEOUT, InvalidValue),
        (vec![(key::HC_INTERVAL, "4")], key::HC_INTERVAL, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::TARGET_GROUP_ATTRIBUTES, "deregistration_delay.timeout_seconds=5")], key::TARGET_GROUP_ATTRIBUTES, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::TARGET_GROUP_ATTRIBUTES, "preserve_client_ip.enabled=yes")], key::TARGET_GROUP_ATTRIBUTES, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::TARGET_GROUP_ATTRIBUTES, "proxy_protocol_v2.enabled")], key::TARGET_GROUP_ATTRIBUTES, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::EIP_ALLOCATIONS, "eip-1")], key::EIP_ALLOCATIONS, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::PRIVATE_IPV4_ADDRESSES, "10.0.0")], key::PRIVATE_IPV4_ADDRESSES, InvalidValue),
        (vec![(key::ADDITIONAL_RESOURCE_TAGS, "aws:owner=me")], key::ADDITIONAL_RESOURCE_TAGS, InvalidValue),
        (vec![(key::ADDITIONAL_RESOURCE_TAGS, "=v")], key::ADDITIONAL_RESOURCE_TAGS, InvalidValue),
        (vec![(key::ADDITIONAL_RESOURCE_TAGS, long_tag_key.as_str())], key::ADDITIONAL_RESOURCE_TAGS, InvalidValue),
        (vec![(key::ADDITIONAL_RESOURCE_TAGS, long_tag_value.as_str())], key::ADDITIONAL_RESOURCE_TAGS, InvalidValue),
        (vec![(key::ADDITIONAL_RESOURCE_TAGS, many_tags.as_str())], key::ADDITIONAL_RESOURCE_TAGS, InvalidValue),
        (vec![(key::SUBNETS, "subnet-!")], key::SUBNETS, InvalidValue),
        (vec![(key::SUBNETS, " , ")], key::SUBNETS, InvalidValue),
        (vec![(key::TARGET_NODE_LABELS, "=x")], key::TARGET_NODE_LABELS, InvalidValue),
        (vec![(key::TYPE, "nlb"), (key::EXTRA_SECURITY_GROUPS, "sg-1")], key::EXTRA_SECURITY_GROUPS, NotApplicable),
        (vec![(key::TYPE, "nlb"), (key::EIP_ALLOCATIONS, "eipalloc-1,eipalloc-2"), (key::SUBNETS, "subnet-1")], key::EIP_ALLOCATIONS, Inconsistent),
        (vec![(key::ACCESS_LOG_ENABLED, "true")], key::ACCESS_LOG_ENABLED, Inconsistent),
        (vec![(key::HC_TIMEOUT, "10"), (key::HC_INTERVAL, "10")], key::HC_TIMEOUT, Inconsistent),
    ];
    for (pairs, suffix, kind) in &cases {
        let found = problems(pairs);
        assert_eq!(found.len(), 1, "{pairs:?} gave {found:?}");
        assert_eq!(found[0].key, format!("{PREFIX}{suffix}"), "{pairs:?}");
        assert_eq!(found[0].kind, *kind, "{pairs:?} gave {found:?}");
    }
}

#[test]
fn full_classic_set() {
    let parsed = parse(&ann(&[
        (key::INTERNAL, "true"),
        (
            key::SSL_CERT,
            "arn:aws:acm:us-east-1:123456789012:certificate/abc",
        ),
        (key::SSL_PORTS, "443, https ,8443"),
        (
            key::SSL_NEGOTIATION_POLICY,
            "ELBSecurityPolicy-TLS-1-2-2017-01",
        ),
        (key::BACKEND_PROTOCOL, "http"),
        (key::PROXY_PROTOCOL, "*"),
        (key::ACCESS_LOG_ENABLED, "true"),
        (key::ACCESS_LOG_EMIT_INTERVAL, "5"),
        (key::ACCESS_LOG_S3_BUCKET_NAME, "logs"),
        (key::ACCESS_LOG_S3_BUCKET_PREFIX, "prod/web"),
        (key::CONNECTION_DRAINING_ENABLED, "true"),
        (key::CONNECTION_DRAINING_TIMEOUT, "60"),
        (key::CONNECTION_IDLE_TIMEOUT, "120"),
        (key::CROSS_ZONE, "false"),
        (key::SECURITY_GROUPS, "sg-0123456789abcdef0"),
        (key::EXTRA_SECURITY_GROUPS, "sg-1, sg-2,"),
        (key::HC_PROTOCOL, "http"),
        (key::HC_PORT, "traffic-port"),
        (key::HC_PATH, "/healthz"),
        (key::HC_HEALTHY_THRESHOLD, "2"),
        (key::HC_UNHEALTHY_THRESHOLD, "10"),
        (key::HC_TIMEOUT, "5"),
        (key::HC_INTERVAL, "30"),
        (key::ADDITIONAL_RESOURCE_TAGS, "team=web, env=prod,flag"),
        (key::SUBNETS, "subnet-abc,public-a"),
        (key::TARGET_NODE_LABELS, "role=edge"),
    ]))
    .unwrap();
    let expected = LbAnnotations {
        kind: LbKind::Classic,
        internal: true,
        ssl: Some(SslConfig {
            certificate_arn: "arn:aws:acm:us-east-1:123456789012:certificate/abc".into(),
            ports: SslPorts::Only(vec![
                PortRef::Number(443),
                PortRef::Name("https".into()),
                PortRef::Number(8443),
            ]),
            negotiation_policy: Some("ELBSecurityPolicy-TLS-1-2-2017-01".into()),
        }),
        backend_protocol: Some(BackendProtocol::Http),
        proxy_protocol: true,
        access_log: Some(AccessLog {
            enabled: true,
            emit_interval_minutes: Some(5),
            s3_bucket_name: Some("logs".into()),
            s3_bucket_prefix: Some("prod/web".into()),
        }),
        connection_draining: Some(60),
        idle_timeout: Some(120),
        cross_zone: Some(false),
        security_groups: vec!["sg-0123456789abcdef0".into()],
        extra_security_groups: vec!["sg-1".into(), "sg-2".into()],
        health_check: HealthCheckOverrides {
            protocol: Some(HealthCheckProtocol::Http),
            port: Some(HealthCheckPort::TrafficPort),
            path: Some("/healthz".into()),
            healthy_threshold: Some(2),
            unhealthy_threshold: Some(10),
            timeout_seconds: Some(5),
            interval_seconds: Some(30),
        },
        target_group_attributes: vec![],
        eip_allocations: vec![],
        private_ipv4_addresses: vec![],
        additional_tags: [("team", "web"), ("env", "prod"), ("flag", "")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        subnets: vec!["subnet-abc".into(), "public-a".into()],
        target_node_labels: [("role".to_owned(), "edge".to_owned())].into(),
        ignored: vec![],
    };
    assert_eq!(parsed, expected);
    let ssl = parsed.ssl.unwrap();
    assert!(ssl.ports.matches(443, None));
    assert!(ssl.ports.matches(9000, Some("https")));
    assert!(!ssl.ports.matches(80, Some("http")));
}

#[test]
fn full_network_set() {
    let parsed = parse(
        &ann(&[
            (key::TYPE, "nlb"),
            (key::INTERNAL, "false"),
            (key::SSL_CERT, "arn:aws:acm:eu-west-1:1:certificate/x"),
            (key::BACKEND_PROTOCOL, "ssl"),
            (key::SECURITY_GROUPS, "sg-a,sg-b"),
            (key::HC_PROTOCOL, "HTTPS"),
            (key::HC_PORT, "10256"),
            (key::HC_PATH, "/"),
            (key::HC_INTERVAL, "10"),
            (
                key::TARGET_GROUP_ATTRIBUTES,
                "preserve_client_ip.enabled=false, proxy_protocol_v2.enabled=true",
            ),
            (key::EIP_ALLOCATIONS, "eipalloc-1,eipalloc-2"),
            (key::PRIVATE_IPV4_ADDRESSES, "10.0.1.10,10.0.2.10"),
            (key::SUBNETS, "subnet-1,subnet-2"),
            (key::ADDITIONAL_RESOURCE_TAGS, "a=b"),
        ])
        .into_iter()
        .chain([("example.com/unrelated".to_owned(), "ignored".to_owned())])
        .collect(),
    )
    .unwrap();
    let mut expected = LbAnnotations::empty(LbKind::Network, false);
    expected.ssl = Some(SslConfig {
        certificate_arn: "arn:aws:acm:eu-west-1:1:certificate/x".into(),
        ports: SslPorts::All,
        negotiation_policy: None,
    });
    expected.backend_protocol = Some(BackendProtocol::Ssl);
    expected.security_groups = vec!["sg-a".into(), "sg-b".into()];
    expected.health_check = HealthCheckOverrides {
        protocol: Some(HealthCheckProtocol::Https),
        port: Some(HealthCheckPort::Port(10256)),
        path: Some("/".into()),
        interval_seconds: Some(10),
        ..Default::default()
    };
    expected.target_group_attributes = vec![
        ("preserve_client_ip.enabled".into(), false),
        ("proxy_protocol_v2.enabled".into(), true),
    ];
    expected.eip_allocations = vec!["eipalloc-1".into(), "eipalloc-2".into()];
    expected.private_ipv4_addresses =
        vec!["10.0.1.10".parse().unwrap(), "10.0.2.10".parse().unwrap()];
    expected.subnets = vec!["subnet-1".into(), "subnet-2".into()];
    expected.additional_tags = [("a".to_owned(), "b".to_owned())].into();
    assert_eq!(parsed, expected);
}

#[test]
fn reports_every_problem_at_once() {
    let found = problems(&[
        (key::CONNECTION_IDLE_TIMEOUT, "0"),
        (key::HC_PATH, "nope"),
        (key::SECURITY_GROUPS, "web"),
    ]);
    let mut keys: Vec<_> = found.iter().map(|p| p.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            format!("{PREFIX}{}", key::CONNECTION_IDLE_TIMEOUT),
            format!("{PREFIX}{}", key::HC_PATH),
            format!("{PREFIX}{}", key::SECURITY_GROUPS),
        ]
    );
    let text = AnnotationErrors(found).to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.contains("healthcheck-path: must start with /"),
        "{text}"
    );
}

#[test]
fn display_truncates_long_values_and_stays_one_line() {
    let value = format!("{}\nrest", "x".repeat(500));
    let found = problems(&[(key::BACKEND_PROTOCOL, value.as_str())]);
    let text = AnnotationErrors(found).to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&format!("{PREFIX}{}", key::BACKEND_PROTOCOL)));
    assert!(text.len() < 400, "{text}");
    assert!(text.contains("505 chars"), "{text}");
}

#[test]
fn oversized_value_is_not_parsed_further() {
    let huge = "subnet-!".repeat(2_000);
    let found = problems(&[(key::SUBNETS, huge.as_str())]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, ProblemKind::ValueTooLong);
    // Exactly at the limit is still accepted.
    let edge = format!("/{}", "p".repeat(MAX_VALUE_CHARS - 1));
    let ok = parse(&ann(&[(key::SSL_NEGOTIATION_POLICY, edge.as_str())]));
    assert!(ok.is_ok());
}

#[test]
fn ten_thousand_characters_are_refused_with_the_bound_in_the_message() {
    let long = "x".repeat(10_000);
    let found = problems(&[(key::HC_PATH, long.as_str())]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, ProblemKind::ValueTooLong);
    let text = found[0].to_string();
    assert!(
        text.contains("10000 characters long, at most 4096"),
        "{text}"
    );
    assert!(text.len() < 400, "the value is quoted only in part: {text}");
    // Tags may legitimately be longer: 50 tags of the longest key and value.
    let tags = (0..MAX_TAGS)
        .map(|i| format!("{:0>128}={}", i, "v".repeat(MAX_TAG_VALUE_CHARS)))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(tags.len() > MAX_VALUE_CHARS && tags.len() <= MAX_TAGS_VALUE_CHARS);
    let parsed = parse(&ann(&[(key::ADDITIONAL_RESOURCE_TAGS, tags.as_str())])).unwrap();
    assert_eq!(parsed.additional_tags.len(), MAX_TAGS);
}

#[test]
fn tag_problems_stay_on_one_line() {
    // Regression: tag keys were echoed raw, so a key holding a newline split the Event note.
    let values = [
        "aws:x\ny=1".to_string(),
        format!("a\nb=\u{1b}[31m{}", "v".repeat(300)),
        format!("{}\n=v", "k".repeat(200)),
    ];
    for value in values {
        let found = problems(&[(key::ADDITIONAL_RESOURCE_TAGS, value.as_str())]);
        assert!(!found.is_empty());
        for p in found {
            assert!(!p.to_string().contains('\n'), "{p}");
        }
    }
}

#[test]
fn elsewhere_types_are_left_alone() {
    for t in ["nlb-ip", "external"] {
        let parsed = parse(&ann(&[
            (key::TYPE, t),
            (key::INTERNAL, "true"),
            ("scheme", "internet-facing"),
            (key::HC_PATH, "not validated"),
        ]))
        .unwrap();
        assert_eq!(parsed, LbAnnotations::empty(LbKind::Elsewhere, true));
    }
}

#[test]
fn internal_follows_upstream() {
    for (value, internal) in [
        ("true", true),
        ("0.0.0.0/0", true),
        ("False", true),
        ("false", false),
        ("", false),
    ] {
        assert_eq!(
            parse(&ann(&[(key::INTERNAL, value)])).unwrap().internal,
            internal,
            "{value:?}"
        );
    }
    assert!(!parse(&BTreeMap::new()).unwrap().internal);
}

#[test]
fn defaults_without_annotations() {
    let parsed = parse(&BTreeMap::new()).unwrap();
    assert_eq!(parsed, LbAnnotations::empty(LbKind::Classic, false));
    let drain = parse(&ann(&[(key::CONNECTION_DRAINING_ENABLED, "true")])).unwrap();
    assert_eq!(
        drain.connection_draining,
        Some(DEFAULT_CONNECTION_DRAINING_TIMEOUT)
    );
    let off = parse(&ann(&[
        (key::CONNECTION_DRAINING_ENABLED, "false"),
        (key::CONNECTION_DRAINING_TIMEOUT, "30"),
    ]))
    .unwrap();
    assert_eq!(off.connection_draining, None);
}

#[test]
fn extra_and_plain_security_groups_together_are_fine() {
    let parsed = parse(&ann(&[
        (key::SECURITY_GROUPS, "sg-1"),
        (key::EXTRA_SECURITY_GROUPS, "sg-2"),
    ]))
    .unwrap();
    assert_eq!(parsed.security_groups, ["sg-1"]);
    assert_eq!(parsed.extra_security_groups, ["sg-2"]);
}

#[test]
fn unknown_and_foreign_keys_are_ignored_with_a_warning() {
    let parsed = parse(&ann(&[("helthcheck-path", "/")])).unwrap();
    assert_eq!(parsed.ignored.len(), 1);
    assert_eq!(parsed.ignored[0].kind, ProblemKind::UnknownKey);
    assert!(parsed.ignored[0].reason.contains("healthcheck-path"));
    let parsed = parse(&ann(&[(key::TYPE, "nlb"), (key::CROSS_ZONE, "true")])).unwrap();
    assert_eq!(parsed.ignored[0].kind, ProblemKind::NotApplicable);
    assert_eq!(
        parsed.cross_zone,
        Some(true),
        "parsed, then unused by the NLB code"
    );
    let parsed = parse(&ann(&[(key::PRIVATE_IPV4_ADDRESSES, "10.0.0.1")])).unwrap();
    assert_eq!(parsed.ignored[0].kind, ProblemKind::NotApplicable);
}

fn arbitrary_annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    let suffix = prop_oneof![
        proptest::sample::select(KNOWN_SUFFIXES).prop_map(str::to_owned),
        any::<String>(),
    ];
    let value = prop_oneof![
        any::<String>(),
        "[a-z0-9=,:./ *-]{0,40}",
        (0usize..3, MAX_VALUE_CHARS - 10..MAX_VALUE_CHARS + 10)
            .prop_map(|(c, n)| ["x", ",", "é"][c].repeat(n)),
    ];
    proptest::collection::btree_map(suffix.prop_map(|s| format!("{PREFIX}{s}")), value, 0..12)
}

proptest! {
    #[test]
    fn parse_never_panics(map in arbitrary_annotations()) {
        match parse(&map) {
            Ok(_) => {}
            Err(errors) => {
                prop_assert!(!errors.0.is_empty());
                let text = errors.to_string();
                prop_assert_eq!(text.lines().count(), errors.0.len());
            }
        }
    }

    #[test]
    fn parse_never_panics_on_huge_values(suffix in proptest::sample::select(KNOWN_SUFFIXES), n in 0usize..200_000) {
        let map = ann(&[(suffix, &",".repeat(max_value_chars(suffix) + 1 + n))]);
        let errors = parse(&map).unwrap_err();
        let too_long = errors.0.iter().filter(|p| p.kind == ProblemKind::ValueTooLong).count();
        prop_assert_eq!(too_long, 1);
        prop_assert!(errors.0.iter().all(|p| p.kind != ProblemKind::InvalidValue));
    }
}
