//! What the glue reads from the cluster: the provider cluster configuration and its stored
//! discovery data (`kube-system/d8-provider-cluster-configuration`), the discoverer's discovery
//! data (`kube-system/d8-cloud-provider-discovery-data`), the module settings (the ModuleConfig
//! `cloud-provider-<cloud>` where Deckhouse's CRD is served, else the chart's values file) and the
//! cluster-wide default class (the ModuleConfig `global`'s `defaultClusterStorageClass`, else the
//! values file's `global.defaultClusterStorageClass`).

use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::Cloud;

/// Namespace and name of the provider cluster configuration Secret.
pub const CLUSTER_CONFIGURATION: (&str, &str) =
    ("kube-system", "d8-provider-cluster-configuration");
/// Its configuration key (YAML).
pub const CLUSTER_CONFIGURATION_KEY: &str = "cloud-provider-cluster-configuration.yaml";
/// Its stored discovery data key (JSON).
pub const STORED_DISCOVERY_KEY: &str = "cloud-provider-discovery-data.json";
/// Namespace and name of the discoverer's Secret.
pub const DISCOVERY: (&str, &str) = ("kube-system", "d8-cloud-provider-discovery-data");
/// Its key.
pub const DISCOVERY_KEY: &str = "discovery-data.json";

/// Everything a reconcile reads, parsed.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The provider cluster configuration (`Null` when the Secret or key is absent).
    pub cluster_configuration: Value,
    /// The discovery data: the discoverer's when it published one, else the stored one.
    pub discovery: Value,
    /// Whether the discoverer's document was there (OpenStack/DVP classes come only from it).
    pub discovered: bool,
    /// The module settings.
    pub settings: Value,
    /// The cluster-wide default class.
    pub global_default: Option<String>,
    /// Where the settings came from (for messages).
    pub settings_source: String,
}

/// Why the inputs could not be read; each names the object and key.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The API refused or failed.
    #[error("reading {what}: {source}")]
    Kube {
        /// What was read.
        what: String,
        /// Why.
        source: kube::Error,
    },
    /// A document does not parse (never quoted).
    #[error("{0}")]
    Parse(String),
}

fn module_config_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleConfig"),
        "moduleconfigs",
    )
}

/// Reads the inputs of `cloud`'s module; `values` is the chart's values file (used where no
/// ModuleConfig is served).
pub async fn read(
    client: &kube::Client,
    cloud: Cloud,
    values: Option<&Path>,
) -> Result<Inputs, InputError> {
    let secrets = |ns: &str| Api::<Secret>::namespaced(client.clone(), ns);
    let (ns, name) = CLUSTER_CONFIGURATION;
    let pcc = secrets(ns)
        .get_opt(name)
        .await
        .map_err(|source| InputError::Kube {
            what: format!("secret {ns}/{name}"),
            source,
        })?;
    let key = |s: &Option<Secret>, k: &str| -> Option<Vec<u8>> {
        s.as_ref()?.data.as_ref()?.get(k).map(|b| b.0.clone())
    };
    let cluster_configuration = match key(&pcc, CLUSTER_CONFIGURATION_KEY) {
        Some(bytes) => serde_yaml::from_slice::<Value>(&bytes).map_err(|e| {
            InputError::Parse(format!(
                "secret {ns}/{name} key {CLUSTER_CONFIGURATION_KEY}: not YAML ({})",
                e.location()
                    .map(|l| format!("line {}", l.line()))
                    .unwrap_or_default()
            ))
        })?,
        None => Value::Null,
    };
    let stored = json_key(
        &key(&pcc, STORED_DISCOVERY_KEY),
        &format!("secret {ns}/{name} key {STORED_DISCOVERY_KEY}"),
    )?;
    let (dns, dname) = DISCOVERY;
    let discovered_secret =
        secrets(dns)
            .get_opt(dname)
            .await
            .map_err(|source| InputError::Kube {
                what: format!("secret {dns}/{dname}"),
                source,
            })?;
    let discovered = json_key(
        &key(&discovered_secret, DISCOVERY_KEY),
        &format!("secret {dns}/{dname} key {DISCOVERY_KEY}"),
    )?;
    let values_doc = match values {
        Some(path) => values_document(path)?,
        None => Value::Null,
    };
    let module_configs = Api::<DynamicObject>::all_with(client.clone(), &module_config_resource());
    let served = module_configs
        .list_metadata(&ListParams::default().limit(1))
        .await;
    let (settings, global_default, settings_source) = match served {
        Ok(_) => {
            let get = |name: &'static str| {
                let api = module_configs.clone();
                async move {
                    api.get_opt(name).await.map_err(|source| InputError::Kube {
                        what: format!("moduleconfig {name}"),
                        source,
                    })
                }
            };
            let mc = get(cloud.module()).await?;
            let global = get("global").await?;
            let settings = mc
                .and_then(|m| m.data.pointer("/spec/settings").cloned())
                .unwrap_or(Value::Null);
            let global_default = global
                .and_then(|g| {
                    g.data
                        .pointer("/spec/settings/defaultClusterStorageClass")
                        .cloned()
                })
                .and_then(|v| v.as_str().map(str::to_owned));
            (
                settings,
                global_default,
                format!("moduleconfig {}", cloud.module()),
            )
        }
        // Not a Deckhouse cluster: the chart's values.
        Err(kube::Error::Api(e)) if e.code == 404 => (
            values_doc.get("settings").cloned().unwrap_or(Value::Null),
            values_doc
                .pointer("/global/defaultClusterStorageClass")
                .and_then(Value::as_str)
                .map(str::to_owned),
            "values file".to_string(),
        ),
        Err(source) => {
            return Err(InputError::Kube {
                what: "moduleconfigs".into(),
                source,
            })
        }
    };
    let has_discovered = !discovered.is_null();
    Ok(Inputs {
        cluster_configuration,
        discovery: if has_discovered { discovered } else { stored },
        discovered: has_discovered,
        settings,
        global_default: global_default.filter(|g| !g.is_empty()),
        settings_source,
    })
}

fn json_key(bytes: &Option<Vec<u8>>, what: &str) -> Result<Value, InputError> {
    match bytes {
        Some(b) if !b.iter().all(u8::is_ascii_whitespace) => {
            serde_json::from_slice(b).map_err(|e| {
                InputError::Parse(format!(
                    "{what}: not JSON ({})",
                    stratus_runtime::redact::json(&e)
                ))
            })
        }
        _ => Ok(Value::Null),
    }
}

/// The chart's values file: a YAML mapping whose `settings` (if any) are module settings and
/// whose `global` (if any) is a mapping. Errors name the flag, the path and the key, never a
/// value.
pub fn values_document(path: &Path) -> Result<Value, InputError> {
    let what = format!("--values {}", path.display());
    let text =
        std::fs::read(path).map_err(|e| InputError::Parse(format!("{what}: {}", e.kind())))?;
    let doc = serde_yaml::from_slice::<Value>(&text)
        .map_err(|_| InputError::Parse(format!("{what}: not a YAML document")))?;
    if !doc.is_object() && !doc.is_null() {
        return Err(InputError::Parse(format!(
            "{what}: not a mapping of values"
        )));
    }
    // Only the two keys the module charts write; anything else is not this file.
    if doc
        .as_object()
        .is_some_and(|o| o.keys().any(|k| k != "settings" && k != "global"))
    {
        return Err(InputError::Parse(format!(
            "{what}: keys other than settings and global"
        )));
    }
    if doc
        .get("global")
        .is_some_and(|g| !g.is_null() && !g.is_object())
    {
        return Err(InputError::Parse(format!("{what}: global: not a mapping")));
    }
    if let Some(settings) = doc.get("settings") {
        crate::settings::parse(settings.clone())
            .map_err(|e| InputError::Parse(format!("{what}: {e}")))?;
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_files_hold_settings_and_global_only() {
        let dir = std::env::temp_dir().join(format!("stratus-values-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let good = file(
            "good.yaml",
            "settings:\n  storageClass:\n    exclude: [a]\nglobal: {}\n",
        );
        assert!(values_document(&good).is_ok());
        let other = file("other.yaml", "kind: [hidden]\n");
        let err = values_document(&other).unwrap_err().to_string();
        assert!(
            err.ends_with("keys other than settings and global"),
            "{err}"
        );
        assert!(!err.contains("hidden"));
        let typed = file("typed.yaml", "settings:\n  storageClass: 3\n");
        assert!(values_document(&typed).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
