//! Property tests of the annotation parser beyond "never panics" (in `tests.rs`): typed values
//! round-trip from their text, ranges are enforced exactly, and every problem is one line.

use super::*;
use proptest::prelude::*;
use stratus_cloud_kit::annotations::parse_go_bool;

fn ann(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v.clone()))
        .collect()
}

/// Joins list items the ways people write them: `a,b`, `a, b`, ` a ,b `.
fn join(items: &[String], sep: &str) -> String {
    items.join(sep)
}

fn sep() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![",", ", ", " , ", ",,"])
}

fn tag_key() -> impl Strategy<Value = String> {
    "[A-Za-z0-9+._:/@-]{1,128}".prop_filter("reserved prefix", |k| {
        !k.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:"))
    })
}

fn tag_value() -> impl Strategy<Value = String> {
    "([A-Za-z0-9+=._:/@-]([A-Za-z0-9+=._:/@ -]{0,254}[A-Za-z0-9+=._:/@-])?)?"
}

/// Pieces that exercise every branch of the list and key=value parsers, newlines included.
fn hostile_value() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just(",".to_string()),
        Just("=".to_string()),
        Just("\n".to_string()),
        Just("\"".to_string()),
        Just("aws:".to_string()),
        Just("sg-".to_string()),
        Just("subnet-".to_string()),
        Just("arn:".to_string()),
        Just("*".to_string()),
        Just("k".repeat(130)),
        Just("v".repeat(260)),
        "[a-z0-9. -]{0,6}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(token, 0..12).prop_map(|t| t.concat())
}

proptest! {
    #[test]
    fn every_problem_is_one_line(
        values in prop::collection::vec((prop::sample::select(KNOWN_SUFFIXES), hostile_value()), 1..6)
    ) {
        let map: BTreeMap<String, String> =
            values.into_iter().map(|(k, v)| (format!("{PREFIX}{k}"), v)).collect();
        if let Err(errors) = parse(&map) {
            for p in &errors.0 {
                let line = p.to_string();
                prop_assert!(!line.contains('\n') && !line.contains('\r'), "{:?}", line);
            }
            prop_assert_eq!(errors.to_string().lines().count(), errors.0.len());
        }
    }

    #[test]
    fn tags_round_trip(tags in prop::collection::btree_map(tag_key(), tag_value(), 1..=MAX_TAGS), sep in sep()) {
        let text = join(&tags.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(), sep);
        let parsed = parse(&ann(&[(key::ADDITIONAL_RESOURCE_TAGS, text)]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.additional_tags, tags);
    }

    #[test]
    fn too_many_tags_are_refused(n in MAX_TAGS + 1..MAX_TAGS * 3) {
        let text = (0..n).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join(",");
        prop_assert!(parse(&ann(&[(key::ADDITIONAL_RESOURCE_TAGS, text)])).is_err());
    }

    #[test]
    fn labels_round_trip(
        labels in prop::collection::btree_map("[a-z0-9./-]{1,40}", "[A-Za-z0-9._-]{0,63}", 1..10),
        sep in sep(),
    ) {
        let text = join(&labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(), sep);
        let parsed = parse(&ann(&[(key::TARGET_NODE_LABELS, text)]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.target_node_labels, labels);
    }

    #[test]
    fn security_groups_round_trip(ids in prop::collection::vec("sg-[0-9a-f]{8,17}", 1..10), sep in sep()) {
        let parsed = parse(&ann(&[(key::SECURITY_GROUPS, join(&ids, sep))]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.security_groups, ids);
    }

    #[test]
    fn subnets_and_allocations_round_trip(
        pairs in prop::collection::vec(("subnet-[0-9a-f]{8,17}", "eipalloc-[0-9a-f]{8,17}"), 1..6),
        sep in sep(),
    ) {
        let (subnets, eips): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
        let parsed = parse(&ann(&[
            (key::TYPE, "nlb".into()),
            (key::SUBNETS, join(&subnets, sep)),
            (key::EIP_ALLOCATIONS, join(&eips, sep)),
        ]))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.subnets, subnets);
        prop_assert_eq!(parsed.eip_allocations, eips);
    }

    #[test]
    fn private_addresses_round_trip(ips in prop::collection::vec(any::<Ipv4Addr>(), 1..6), sep in sep()) {
        let text = join(&ips.iter().map(Ipv4Addr::to_string).collect::<Vec<_>>(), sep);
        let parsed = parse(&ann(&[(key::TYPE, "nlb".into()), (key::PRIVATE_IPV4_ADDRESSES, text)]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.private_ipv4_addresses, ips);
    }

    #[test]
    fn ssl_ports_round_trip(
        refs in prop::collection::vec(prop_oneof![
            (1u16..).prop_map(PortRef::Number),
            "[a-z]([a-z0-9-]{0,10}[a-z0-9])?".prop_map(PortRef::Name),
        ], 1..8),
        sep in sep(),
    ) {
        let text = join(
            &refs.iter().map(|r| match r {
                PortRef::Number(n) => n.to_string(),
                PortRef::Name(n) => n.clone(),
            }).collect::<Vec<_>>(),
            sep,
        );
        let parsed = parse(&ann(&[(key::SSL_CERT, "arn:aws:acm:x".into()), (key::SSL_PORTS, text)]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.ssl.unwrap().ports, SslPorts::Only(refs));
    }

    #[test]
    fn booleans_take_go_spellings_only(
        word in prop_oneof![
            prop::sample::select(vec!["1", "t", "T", "true", "TRUE", "True", "0", "f", "F", "false", "FALSE", "False"]).prop_map(str::to_owned),
            any::<String>(),
        ]
    ) {
        let result = parse(&ann(&[(key::CROSS_ZONE, word.clone())]));
        match parse_go_bool(&word) {
            Some(b) => prop_assert_eq!(result.unwrap().cross_zone, Some(b)),
            None => {
                let errors = result.unwrap_err();
                prop_assert_eq!(errors.0.len(), 1);
                prop_assert!(errors.0[0].key.ends_with(key::CROSS_ZONE));
            }
        }
    }

    #[test]
    fn integers_are_checked_against_their_range(
        n in prop_oneof![any::<i64>(), -10i64..5000],
        which in 0usize..6,
    ) {
        let (suffix, min, max) = [
            (key::CONNECTION_IDLE_TIMEOUT, 1, 4000),
            (key::CONNECTION_DRAINING_TIMEOUT, 1, 3600),
            (key::HC_HEALTHY_THRESHOLD, 2, 10),
            (key::HC_UNHEALTHY_THRESHOLD, 2, 10),
            (key::HC_TIMEOUT, 2, 60),
            (key::HC_INTERVAL, 5, 300),
        ][which];
        let result = parse(&ann(&[(suffix, n.to_string())]));
        if (min..=max).contains(&n) {
            let parsed = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let got = match suffix {
                key::CONNECTION_IDLE_TIMEOUT => parsed.idle_timeout,
                key::HC_HEALTHY_THRESHOLD => parsed.health_check.healthy_threshold,
                key::HC_UNHEALTHY_THRESHOLD => parsed.health_check.unhealthy_threshold,
                key::HC_TIMEOUT => parsed.health_check.timeout_seconds,
                key::HC_INTERVAL => parsed.health_check.interval_seconds,
                // Parsed and range-checked, but only used when draining is enabled.
                _ => Some(n as u32),
            };
            prop_assert_eq!(got, Some(n as u32));
        } else {
            let errors = result.unwrap_err();
            prop_assert_eq!(errors.0.len(), 1);
            prop_assert!(errors.0[0].reason.contains(&max.to_string()));
        }
    }

    #[test]
    fn health_check_ports_round_trip(port in 1u16..) {
        let parsed = parse(&ann(&[(key::HC_PORT, port.to_string())])).unwrap();
        prop_assert_eq!(parsed.health_check.port, Some(HealthCheckPort::Port(port)));
    }

    #[test]
    fn values_over_the_bound_are_refused_unparsed(which in prop::sample::select(KNOWN_SUFFIXES), extra in 1usize..3000) {
        let bound = max_value_chars(which);
        let map = ann(&[(which, "é".repeat(bound + extra))]);
        let errors = parse(&map).unwrap_err();
        prop_assert!(errors.0.iter().any(|p| p.kind == ProblemKind::ValueTooLong));
        prop_assert!(errors.0.iter().all(|p| p.kind != ProblemKind::InvalidValue));
        // Multibyte characters count once: exactly at the bound is not too long.
        let at_bound = parse(&ann(&[(which, "é".repeat(bound))]));
        if let Err(errors) = at_bound {
            prop_assert!(errors.0.iter().all(|p| p.kind != ProblemKind::ValueTooLong));
        }
    }
}
