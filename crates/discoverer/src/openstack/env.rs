//! The OpenStack discoverer's settings from its environment, as Deckhouse's (gophercloud's
//! `AuthOptionsFromEnv` plus `OS_REGION`, `OS_CACERT`, `CLUSTER_UUID`, `MODULE_CONFIG`; and, as
//! the OpenStack command-line clients read it, `OS_INTERFACE`): read by a
//! pure function of a variable lookup, every problem reported at once, the password never shown.

use std::path::PathBuf;

use serde_json::Value;
use stratus_openstack_api::config::{Credentials, Interface, Named, Secret};

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenStackSettings {
    /// `OS_AUTH_URL`.
    pub auth_url: String,
    /// The user and project.
    pub credentials: Credentials,
    /// `OS_REGION` (or `OS_REGION_NAME`).
    pub region: String,
    /// `OS_CACERT`: extra trusted CAs (PEM file).
    pub ca_file: Option<PathBuf>,
    /// `OS_INTERFACE` (or `OS_ENDPOINT_TYPE`): which catalog endpoints to call; public when unset.
    pub interface: Interface,
    /// `CLUSTER_UUID`: the `cinder.csi.openstack.org/cluster` metadata of this cluster's volumes.
    pub cluster_uuid: Option<String>,
    /// `MODULE_CONFIG`: the module's settings (JSON), used when the stored discovery data is
    /// empty.
    pub module_config: Option<Value>,
}

/// The first set, non-empty variable of `names`.
fn first(lookup: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| lookup(n).filter(|v| !v.trim().is_empty()))
}

/// Reads the settings; `Err` lists every missing or bad variable.
pub fn settings(lookup: &dyn Fn(&str) -> Option<String>) -> Result<OpenStackSettings, String> {
    let mut problems = Vec::new();
    let mut required = |names: &[&str]| {
        first(lookup, names).unwrap_or_else(|| {
            problems.push(format!("{} is not set", names.join(" or ")));
            String::new()
        })
    };
    let auth_url = required(&["OS_AUTH_URL"]);
    let username = required(&["OS_USERNAME"]);
    let password = required(&["OS_PASSWORD"]);
    let region = required(&["OS_REGION", "OS_REGION_NAME"]);
    let domain = first(lookup, &["OS_DOMAIN_NAME", "OS_USER_DOMAIN_NAME"]);
    let project = match (
        first(lookup, &["OS_TENANT_ID", "OS_PROJECT_ID"]),
        first(lookup, &["OS_TENANT_NAME", "OS_PROJECT_NAME"]),
    ) {
        (Some(id), _) => Named::Id(id),
        (None, Some(name)) => Named::Name(name),
        (None, None) => {
            problems.push("OS_TENANT_NAME or OS_TENANT_ID is not set".into());
            Named::Name(String::new())
        }
    };
    if matches!(project, Named::Name(_)) && domain.is_none() {
        problems.push("OS_DOMAIN_NAME is not set: a project given by name needs its domain".into());
    }
    let project_domain = first(lookup, &["OS_PROJECT_DOMAIN_NAME"]).or_else(|| domain.clone());
    let module_config = match first(lookup, &["MODULE_CONFIG"]) {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                problems.push("MODULE_CONFIG is not a JSON object".into());
                None
            }
            Err(e) => {
                problems.push(format!(
                    "MODULE_CONFIG is not JSON: {}",
                    stratus_runtime::redact::json(&e)
                ));
                None
            }
        },
    };
    let interface = match first(lookup, &["OS_INTERFACE", "OS_ENDPOINT_TYPE"]) {
        None => Interface::Public,
        Some(text) => Interface::parse(&text).unwrap_or_else(|| {
            problems.push(format!(
                "OS_INTERFACE is {text:?}: public, internal or admin"
            ));
            Interface::Public
        }),
    };
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(OpenStackSettings {
        auth_url,
        credentials: Credentials::Password {
            user: Named::Name(username),
            user_domain: domain.map(Named::Name),
            password: Secret::new(password),
            project,
            project_domain: project_domain.map(Named::Name),
        },
        region,
        ca_file: first(lookup, &["OS_CACERT"]).map(PathBuf::from),
        interface,
        cluster_uuid: first(lookup, &["CLUSTER_UUID"]),
        module_config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const BASE: &[(&str, &str)] = &[
        ("OS_AUTH_URL", "https://keystone:5000/v3"),
        ("OS_USERNAME", "deckhouse"),
        ("OS_PASSWORD", "s3cret"),
        ("OS_DOMAIN_NAME", "Default"),
        ("OS_TENANT_NAME", "cluster"),
        ("OS_REGION", "RegionOne"),
        ("CLUSTER_UUID", "c-1"),
    ];

    #[test]
    fn deckhouse_variables_make_password_credentials_scoped_by_name() {
        let s = settings(&env(BASE)).unwrap();
        assert_eq!(s.region, "RegionOne");
        assert_eq!(s.cluster_uuid.as_deref(), Some("c-1"));
        assert_eq!(
            s.credentials,
            Credentials::Password {
                user: Named::Name("deckhouse".into()),
                user_domain: Some(Named::Name("Default".into())),
                password: Secret::new("s3cret"),
                project: Named::Name("cluster".into()),
                project_domain: Some(Named::Name("Default".into())),
            }
        );
        assert!(!format!("{s:?}").contains("s3cret"));
        assert_eq!(s.interface, Interface::Public, "public when unset");
    }

    #[test]
    fn the_interface_is_read_as_the_command_line_clients_read_it() {
        for (name, value, want) in [
            ("OS_INTERFACE", "internal", Interface::Internal),
            ("OS_INTERFACE", "admin", Interface::Admin),
            ("OS_ENDPOINT_TYPE", "internalURL", Interface::Internal),
        ] {
            let mut pairs = BASE.to_vec();
            pairs.push((name, value));
            assert_eq!(
                settings(&env(&pairs)).unwrap().interface,
                want,
                "{name}={value}"
            );
        }
        let mut pairs = BASE.to_vec();
        pairs.push(("OS_INTERFACE", "private"));
        let err = settings(&env(&pairs)).unwrap_err();
        assert!(err.contains("OS_INTERFACE is \"private\""), "{err}");
    }

    #[test]
    fn a_tenant_id_wins_and_region_name_is_accepted() {
        let mut pairs: Vec<_> = BASE
            .iter()
            .filter(|(k, _)| *k != "OS_REGION")
            .copied()
            .collect();
        pairs.extend([("OS_TENANT_ID", "p-1"), ("OS_REGION_NAME", "r2")]);
        let s = settings(&env(&pairs)).unwrap();
        assert_eq!(s.region, "r2");
        let Credentials::Password { project, .. } = s.credentials else {
            panic!("password credentials")
        };
        assert_eq!(project, Named::Id("p-1".into()));
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let err = settings(&env(&[("MODULE_CONFIG", "[1]")])).unwrap_err();
        for missing in [
            "OS_AUTH_URL",
            "OS_USERNAME",
            "OS_PASSWORD",
            "OS_REGION or OS_REGION_NAME",
            "OS_TENANT_NAME or OS_TENANT_ID",
            "MODULE_CONFIG is not a JSON object",
        ] {
            assert!(err.contains(missing), "{missing} in {err}");
        }
        let mut pairs = BASE.to_vec();
        pairs.retain(|(k, _)| *k != "OS_DOMAIN_NAME");
        let err = settings(&env(&pairs)).unwrap_err();
        assert!(err.contains("OS_DOMAIN_NAME"), "{err}");
    }
}
