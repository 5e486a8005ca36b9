//! Property tests of the LeaderMigrationConfiguration parser: any text (YAML-like or not) gives
//! a configuration or an error, never a panic, and generated valid files parse to their values.

use super::*;
use proptest::prelude::*;

const NAMES: &[&str] = &[
    "cloud-node",
    "cloud-node-controller",
    "cloud-node-lifecycle",
    "service",
    "route-controller",
    "node-ipam",
    "attachdetach",
    "some-other-controller",
];

/// Lines of YAML built from the configuration's own vocabulary, nested and broken at random.
fn yaml_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("kind: LeaderMigrationConfiguration\n".to_string()),
        Just("apiVersion: controllermanager.config.k8s.io/v1\n".to_string()),
        Just("leaderName: ".to_string()),
        Just("controllerLeaders:\n".to_string()),
        Just("  - name: ".to_string()),
        Just("    component: ".to_string()),
        Just("&a [*a, *a]\n".to_string()),
        Just("{".to_string()),
        Just("[".to_string()),
        Just("\"".to_string()),
        Just("\n".to_string()),
        "[a-z*-]{0,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(token, 0..30).prop_map(|t| t.concat())
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?"
}

proptest! {
    #[test]
    fn parse_never_panics(text in any::<String>()) {
        let _ = parse(&text);
    }

    #[test]
    fn parse_never_panics_on_yaml_like_text(text in yaml_soup()) {
        if let Ok(c) = parse(&text) {
            prop_assert!(is_dns_subdomain(&c.leader_name));
        }
    }

    #[test]
    fn valid_files_parse_to_their_values(
        labels in prop::collection::vec(dns_label(), 1..4),
        picks in prop::sample::subsequence(NAMES.to_vec(), 0..4),
        components in prop::collection::vec(prop::sample::select(vec!["*", COMPONENT, "kube-controller-manager"]), 4),
        version in prop::sample::select(API_VERSIONS.to_vec()),
    ) {
        // Keep one spelling per controller, as the parser refuses a controller listed twice.
        let mut seen = BTreeSet::new();
        let picks: Vec<&str> = picks.into_iter().filter(|n| seen.insert(canonical(n).unwrap_or(n))).collect();
        let leader_name = labels.join(".");
        let mut text = format!("kind: LeaderMigrationConfiguration\napiVersion: {version}\nleaderName: \"{leader_name}\"\ncontrollerLeaders:\n");
        let mut want = Vec::new();
        for (name, component) in picks.iter().zip(&components) {
            text.push_str(&format!("  - name: \"{name}\"\n    component: \"{component}\"\n"));
            want.push((name.to_string(), component.to_string()));
        }
        if want.is_empty() {
            text = text.replace("controllerLeaders:\n", "controllerLeaders: []\n");
        }
        let parsed = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(parsed, MigrationConfig { leader_name, controller_leaders: want });
    }
}
