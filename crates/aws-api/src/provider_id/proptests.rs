//! Property tests of the provider-ID and node-name parsers: no panic on any text, the upstream
//! format round-trips, and every accepted form names the same instance.

use super::*;
use proptest::prelude::*;

fn instance_id() -> impl Strategy<Value = InstanceId> {
    "i-[0-9a-f]{1,32}".prop_map(|s| InstanceId::parse(&s).unwrap())
}

fn zone() -> impl Strategy<Value = String> {
    "[a-z]{2}-[a-z]{4,9}-[1-9][a-z]{1,2}"
}

/// Text close to provider IDs: the scheme, slashes, zone-ish and hex-ish characters.
fn provider_id_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("aws://".to_string()),
        Just("/".to_string()),
        Just("i-".to_string()),
        Just("fargate-".to_string()),
        "[0-9a-fA-F]{0,6}",
        "[a-z-]{0,6}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(token, 0..10).prop_map(|t| t.concat())
}

proptest! {
    #[test]
    fn parse_never_panics(text in any::<String>()) {
        match AwsProviderId::parse(&text) {
            Ok(p) => prop_assert!(text.contains(p.instance.as_str())),
            Err(e) => prop_assert!(e.to_string().chars().count() <= 10 * MAX_SHOWN_CHARS + 120),
        }
    }

    #[test]
    fn parse_never_panics_on_near_misses(text in provider_id_soup()) {
        if let Ok(p) = AwsProviderId::parse(&text) {
            prop_assert!(InstanceId::parse(p.instance.as_str()).is_some());
            prop_assert!(p.zone.as_deref().is_none_or(|z| !z.is_empty() && !z.contains('/')));
        }
    }

    #[test]
    fn upstream_format_round_trips(zone in zone(), id in instance_id()) {
        let text = AwsProviderId::format(&zone, &id);
        prop_assert_eq!(
            AwsProviderId::parse(&text),
            Ok(AwsProviderId { zone: Some(zone), instance: id })
        );
    }

    #[test]
    fn every_form_names_the_same_instance(zone in zone(), id in instance_id()) {
        for text in [
            id.to_string(),
            format!("aws:////{id}"),
            format!("aws:///{zone}/{id}"),
            format!("aws://{zone}/{id}"),
        ] {
            prop_assert_eq!(&AwsProviderId::parse(&text).unwrap().instance, &id, "{}", text);
        }
    }

    #[test]
    fn instance_ids_are_exactly_i_dash_hex(text in "i-[0-9a-fA-Fg-z]{0,34}") {
        let hex = &text[2..];
        let valid = (1..=32).contains(&hex.len())
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let parsed = InstanceId::parse(&text);
        prop_assert_eq!(parsed.is_some(), valid);
        if let Some(id) = parsed {
            prop_assert_eq!(id.to_string(), text);
        }
    }

    #[test]
    fn fargate_ids_are_told_apart(zone in zone(), rest in "[0-9.]{1,15}") {
        let text = format!("aws:///{zone}/fargate-{rest}");
        prop_assert!(matches!(AwsProviderId::parse(&text), Err(ProviderIdError::Fargate(_))));
    }

    #[test]
    fn node_name_never_panics(name in any::<String>()) {
        if let Some(id) = instance_id_from_node_name(&name) {
            prop_assert!(name.starts_with(id.as_str()));
        }
    }

    #[test]
    fn resource_based_node_names_round_trip(id in instance_id(), region in "[a-z]{2}-[a-z]{4,9}-[1-9]") {
        prop_assert_eq!(instance_id_from_node_name(id.as_str()), Some(id.clone()));
        let name = format!("{id}.{region}.compute.internal");
        prop_assert_eq!(instance_id_from_node_name(&name), Some(id));
    }

    #[test]
    fn ip_based_names_are_not_instance_names(a in any::<[u8; 4]>(), region in "[a-z]{2}-[a-z]{4,9}-[1-9]") {
        let name = format!("ip-{}-{}-{}-{}.{region}.compute.internal", a[0], a[1], a[2], a[3]);
        prop_assert_eq!(instance_id_from_node_name(&name), None);
    }
}
