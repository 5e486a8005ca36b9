//! The DVP discovery document (`DVPCloudDiscoveryData`, `deckhouse.io/v1`, no extra keys
//! allowed): the parent cluster's StorageClasses merged over the stored list (the parent's entries
//! win; entries the parent no longer has are kept, as Deckhouse does), sorted by name, one marked
//! default — the parent's default class when it has one among them, else the first; the zones
//! and layout the installer stored (`["default"]` and no layout when nothing is stored). Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::discoverer::DiscoveryError;

/// One StorageClass entry of the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassEntry {
    /// Name.
    pub name: String,
    /// `Immediate` or `WaitForFirstConsumer` (default).
    #[serde(default = "wait_for_first_consumer")]
    pub volume_binding_mode: String,
    /// `Delete` (default) or `Retain`.
    #[serde(default = "delete")]
    pub reclaim_policy: String,
    /// Whether volumes may grow.
    #[serde(default)]
    pub allow_volume_expansion: bool,
    /// Whether the tenant may use it.
    #[serde(default = "enabled")]
    pub is_enabled: bool,
    /// The tenant's default.
    #[serde(default)]
    pub is_default: bool,
}

fn wait_for_first_consumer() -> String {
    "WaitForFirstConsumer".into()
}
fn delete() -> String {
    "Delete".into()
}
fn enabled() -> bool {
    true
}

/// A parent StorageClass as the document needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentClass {
    /// Name.
    pub name: String,
    /// `volumeBindingMode`, if set.
    pub volume_binding_mode: Option<String>,
    /// `reclaimPolicy`, if set.
    pub reclaim_policy: Option<String>,
    /// `allowVolumeExpansion`, if set.
    pub allow_volume_expansion: Option<bool>,
    /// Annotated `storageclass.kubernetes.io/is-default-class: "true"`.
    pub is_default: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    #[serde(default)]
    layout: Option<String>,
    #[serde(default)]
    zones: Vec<String>,
    #[serde(default)]
    storage_classes: Vec<StorageClassEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<&'a str>,
    zones: &'a [String],
    storage_classes: Vec<StorageClassEntry>,
}

/// The document for `parent`'s classes over the `stored` one.
pub fn document(stored: &[u8], parent: &[ParentClass]) -> Result<Vec<u8>, DiscoveryError> {
    let stored: Stored = if stored.iter().all(u8::is_ascii_whitespace) {
        Stored::default()
    } else {
        let value: Value = serde_json::from_slice(stored).map_err(|e| {
            DiscoveryError::Input(format!(
                "the stored discovery data is not JSON: {}",
                stratus_runtime::redact::json(&e)
            ))
        })?;
        serde_json::from_value(value).map_err(|e| {
            DiscoveryError::Input(format!(
                "the stored discovery data does not parse: {}",
                stratus_runtime::redact::json(&e)
            ))
        })?
    };
    let mut classes: BTreeMap<String, StorageClassEntry> = stored
        .storage_classes
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    for p in parent {
        classes.insert(
            p.name.clone(),
            StorageClassEntry {
                name: p.name.clone(),
                volume_binding_mode: p
                    .volume_binding_mode
                    .clone()
                    .unwrap_or_else(wait_for_first_consumer),
                reclaim_policy: p.reclaim_policy.clone().unwrap_or_else(delete),
                allow_volume_expansion: p.allow_volume_expansion.unwrap_or(false),
                is_enabled: true,
                is_default: false,
            },
        );
    }
    let default = parent
        .iter()
        .filter(|p| p.is_default)
        .map(|p| p.name.as_str())
        .min()
        .map(str::to_owned)
        .or_else(|| classes.keys().next().cloned());
    let storage_classes = classes
        .into_values()
        .map(|mut c| {
            c.is_default = default.as_deref() == Some(c.name.as_str());
            c
        })
        .collect();
    let zones = if stored.zones.is_empty() {
        vec!["default".to_owned()]
    } else {
        stored.zones
    };
    serde_json::to_vec(&Document {
        api_version: "deckhouse.io/v1",
        kind: "DVPCloudDiscoveryData",
        layout: stored.layout.as_deref(),
        zones: &zones,
        storage_classes,
    })
    .map_err(|e| DiscoveryError::Input(format!("cannot encode the discovery data: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, default: bool) -> ParentClass {
        ParentClass {
            name: name.into(),
            volume_binding_mode: None,
            reclaim_policy: None,
            allow_volume_expansion: None,
            is_default: default,
        }
    }

    fn doc(stored: &[u8], parent: &[ParentClass]) -> Value {
        serde_json::from_slice(&document(stored, parent).unwrap()).unwrap()
    }

    #[test]
    fn parent_classes_over_stored_ones_sorted_with_defaults_filled() {
        let stored = br#"{"apiVersion": "deckhouse.io/v1", "kind": "DVPCloudDiscoveryData", "layout": "Standard",
            "zones": ["zone-a"], "storageClasses": [
              {"name": "gone", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain", "allowVolumeExpansion": true, "isEnabled": false, "isDefault": true},
              {"name": "replicated", "volumeBindingMode": "Immediate"}]}"#;
        let mut replicated = class("replicated", false);
        replicated.allow_volume_expansion = Some(true);
        let d = doc(stored, &[class("local", false), replicated]);
        assert_eq!(
            d,
            json!({"apiVersion": "deckhouse.io/v1", "kind": "DVPCloudDiscoveryData", "layout": "Standard",
                   "zones": ["zone-a"], "storageClasses": [
                {"name": "gone", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain", "allowVolumeExpansion": true, "isEnabled": false, "isDefault": true},
                {"name": "local", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete", "allowVolumeExpansion": false, "isEnabled": true, "isDefault": false},
                {"name": "replicated", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete", "allowVolumeExpansion": true, "isEnabled": true, "isDefault": false}]})
        );
    }

    #[test]
    fn the_parents_default_class_is_the_default_and_zones_default_to_default() {
        let d = doc(b"", &[class("a", false), class("b", true)]);
        assert_eq!(d["zones"], json!(["default"]));
        assert!(d.get("layout").is_none());
        assert_eq!(d["storageClasses"][0]["isDefault"], false);
        assert_eq!(d["storageClasses"][1]["isDefault"], true);
        let keys: Vec<&String> = d.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "storageClasses", "zones"]);
    }

    #[test]
    fn a_broken_stored_document_is_an_input_error() {
        assert!(document(b"{", &[]).is_err());
        assert!(document(br#"{"zones": "x"}"#, &[]).is_err());
    }
}
