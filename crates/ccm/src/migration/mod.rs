//! Leader migration (`--enable-leader-migration`, `--leader-migration-config`): parses and checks a
//! `LeaderMigrationConfiguration` and splits the enabled controllers into those that run under the
//! main lease, those that run under the migration lease shared with kube-controller-manager, and
//! those this component must leave to the other one.

use std::collections::BTreeSet;

use serde::Deserialize;

/// The component name controllers are assigned to in the configuration.
pub const COMPONENT: &str = "cloud-controller-manager";

/// The accepted `apiVersion`s (the upstream API group's versions).
const API_VERSIONS: &[&str] = &[
    "controllermanager.config.k8s.io/v1",
    "controllermanager.config.k8s.io/v1beta1",
    "controllermanager.config.k8s.io/v1alpha1",
];

/// The migration lease's default name, as upstream.
pub const DEFAULT_LEADER_NAME: &str = "cloud-provider-extraction-migration";

/// A checked configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationConfig {
    /// Name of the Lease both controller managers compete for.
    pub leader_name: String,
    /// (controller name as written, component) pairs.
    pub controller_leaders: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    kind: Option<String>,
    api_version: Option<String>,
    leader_name: Option<String>,
    resource_lock: Option<String>,
    #[serde(default)]
    controller_leaders: Vec<RawLeader>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeader {
    name: Option<String>,
    component: Option<String>,
}

/// Upstream's default: the cloud controllers move between the two controller managers, whichever
/// holds the migration lease runs them.
pub fn default_config() -> MigrationConfig {
    MigrationConfig {
        leader_name: DEFAULT_LEADER_NAME.into(),
        controller_leaders: ["route", "service", "cloud-node-lifecycle"]
            .iter()
            .map(|n| (n.to_string(), "*".to_string()))
            .collect(),
    }
}

/// Parses and checks a configuration file's text; errors name the offending field.
pub fn parse(text: &str) -> Result<MigrationConfig, String> {
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| {
        format!(
            "not a LeaderMigrationConfiguration: {}",
            stratus_runtime::redact::yaml(&e)
        )
    })?;
    match raw.kind.as_deref() {
        Some("LeaderMigrationConfiguration") => {}
        _ => return Err("kind must be LeaderMigrationConfiguration".into()),
    }
    match raw.api_version.as_deref() {
        Some(v) if API_VERSIONS.contains(&v) => {}
        _ => {
            return Err(format!(
                "apiVersion must be one of {}",
                API_VERSIONS.join(", ")
            ))
        }
    }
    let leader_name = raw
        .leader_name
        .filter(|n| !n.trim().is_empty())
        .ok_or("leaderName is required")?;
    if !is_dns_subdomain(&leader_name) {
        return Err("leaderName is not a valid Lease name (lowercase DNS subdomain)".into());
    }
    match raw.resource_lock.as_deref() {
        None | Some("") | Some("leases") => {}
        Some(_) => {
            return Err(
                "resourceLock is not supported: only \"leases\" (Endpoints and ConfigMap locks are gone from Kubernetes)"
                    .into(),
            )
        }
    }
    let mut seen = BTreeSet::new();
    let mut controller_leaders = Vec::new();
    for (i, leader) in raw.controller_leaders.into_iter().enumerate() {
        let name = leader
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| format!("controllerLeaders[{i}].name is required"))?;
        let component = leader
            .component
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| format!("controllerLeaders[{i}].component is required"))?;
        let key = canonical(&name).unwrap_or(&name).to_string();
        if !seen.insert(key) {
            return Err(format!(
                "controllerLeaders[{i}]: the controller is listed twice (maybe under another of its names)"
            ));
        }
        controller_leaders.push((name, component));
    }
    Ok(MigrationConfig {
        leader_name,
        controller_leaders,
    })
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

pub use crate::controllers::canonical;

/// Where each enabled controller runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Under the main lease (`--leader-elect-resource-name`).
    pub main: Vec<&'static str>,
    /// Under the migration lease.
    pub migrated: Vec<&'static str>,
    /// Listed for another component: not run here.
    pub elsewhere: Vec<&'static str>,
    /// Names listed for this component (or `*`) that are not Stratus controllers, for a warning.
    pub unknown: Vec<String>,
}

/// Splits `enabled` (Stratus names) by the configuration, as upstream: a controller listed for
/// this component or `*` is migrated, one listed for another component is not run, one not
/// listed runs under the main lease.
pub fn assign(enabled: &[&'static str], config: &MigrationConfig) -> Assignment {
    let mut out = Assignment::default();
    for name in enabled {
        let listed = config
            .controller_leaders
            .iter()
            .find(|(n, _)| canonical(n) == Some(*name));
        match listed {
            None => out.main.push(name),
            Some((_, c)) if c == "*" || c == COMPONENT => out.migrated.push(name),
            Some(_) => out.elsewhere.push(name),
        }
    }
    out.unknown = config
        .controller_leaders
        .iter()
        .filter(|(n, c)| (c == "*" || c == COMPONENT) && canonical(n).is_none())
        .map(|(n, _)| n.clone())
        .collect();
    out
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&str] = &[
        "cloud-node",
        "cloud-node-lifecycle",
        "service",
        "route",
        "node-ipam",
    ];

    #[test]
    fn default_migrates_route_service_and_lifecycle() {
        let a = assign(ALL, &default_config());
        assert_eq!(a.main, ["cloud-node", "node-ipam"]);
        assert_eq!(a.migrated, ["cloud-node-lifecycle", "service", "route"]);
        assert!(a.elsewhere.is_empty() && a.unknown.is_empty());
        assert_eq!(default_config().leader_name, DEFAULT_LEADER_NAME);
    }

    #[test]
    fn parses_every_api_version_and_upstream_names() {
        for version in API_VERSIONS {
            let text = format!(
                "kind: LeaderMigrationConfiguration\napiVersion: {version}\nleaderName: my-migration\nresourceLock: leases\ncontrollerLeaders:\n  - name: route-controller\n    component: cloud-controller-manager\n  - name: service-lb-controller\n    component: \"*\"\n  - name: cloud-nodelifecycle-controller\n    component: kube-controller-manager\n  - name: nodeipam\n    component: cloud-controller-manager\n  - name: attachdetach\n    component: \"*\"\n"
            );
            let c = parse(&text).unwrap();
            assert_eq!(c.leader_name, "my-migration");
            let a = assign(ALL, &c);
            assert_eq!(a.main, ["cloud-node"]);
            assert_eq!(a.migrated, ["service", "route", "node-ipam"]);
            assert_eq!(a.elsewhere, ["cloud-node-lifecycle"]);
            assert_eq!(a.unknown, ["attachdetach"]);
        }
    }

    #[test]
    fn resource_lock_defaults_to_leases() {
        let c = parse(
            "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\n",
        )
        .unwrap();
        assert!(c.controller_leaders.is_empty());
        assert_eq!(assign(ALL, &c).main.len(), ALL.len());
    }

    #[test]
    fn bad_configurations_name_the_problem() {
        let head =
            "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\n";
        let cases = [
            ("apiVersion: v1\nkind: LeaderMigrationConfiguration\nleaderName: m\n", "apiVersion must be"),
            ("kind: Other\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\n", "kind must be"),
            (head, "leaderName is required"),
            (&*format!("{head}leaderName: Bad_Name\n"), "not a valid Lease name"),
            (&*format!("{head}leaderName: m\nresourceLock: endpoints\n"), "only \"leases\""),
            (&*format!("{head}leaderName: m\nleaderElect: true\n"), "unknown field `leaderElect`"),
            (&*format!("{head}leaderName: m\ncontrollerLeaders:\n  - component: \"*\"\n"), "controllerLeaders[0].name is required"),
            (&*format!("{head}leaderName: m\ncontrollerLeaders:\n  - name: route\n"), "controllerLeaders[0].component is required"),
            (&*format!("{head}leaderName: m\ncontrollerLeaders:\n  - name: route\n    component: \"*\"\n  - name: route-controller\n    component: \"*\"\n"), "listed twice"),
            ("[not, a, map]", "not a LeaderMigrationConfiguration: line 1, column 1: invalid type: sequence"),
            ("tok-7f3a9c-SECRET", "invalid type: a string, expected struct RawConfig"),
            (&*format!("{head}leaderName: tok-7f3a9c-SECRET_\n"), "not a valid Lease name"),
            (&*format!("{head}leaderName: m\nresourceLock: tok-7f3a9c-SECRET\n"), "not supported"),
            (&*format!("{head}leaderName: [tok-7f3a9c-SECRET]\n"), "leaderName: invalid type: sequence"),
            ("kind: tok-7f3a9c-SECRET\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\n", "kind must be"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains("7f3a9c"), "{text:?}: {e}");
        }
    }
}
