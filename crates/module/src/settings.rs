//! The module settings that drive the glue, with Deckhouse's keys: the `spec.settings` of the
//! ModuleConfig `cloud-provider-<cloud>` on a Deckhouse cluster, the module chart's values
//! elsewhere; and the cluster-wide default class (`global`'s `defaultClusterStorageClass`).

use serde::Deserialize;

/// The settings of one module (keys of every cloud; each cloud reads its own).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModuleSettings {
    /// AWS and OpenStack: `storageClass`.
    pub storage_class: StorageClassSettings,
    /// DVP: `storage`.
    pub storage: DvpStorage,
    /// OpenStack: whether Cinder resizes attached volumes; `allowVolumeExpansion` of every class.
    /// Unset, the controller probes Cinder once (as Deckhouse's hook fills
    /// `internal.supportsOnlineDiskResize`); set, it wins without a probe.
    pub supports_online_disk_resize: Option<bool>,
}

/// `storageClass` of the AWS and OpenStack modules.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageClassSettings {
    /// AWS: classes to create besides (or instead of) the four defaults.
    pub provision: Vec<Provision>,
    /// Regular expressions of class names not to create (AWS: unanchored; OpenStack: anchored).
    pub exclude: Vec<String>,
    /// The module's default class (deprecated in Deckhouse in favour of the global setting).
    pub default: Option<String>,
    /// OpenStack: whether volumes carry zone topology (default true).
    pub topology_enabled: Option<bool>,
}

/// One `storageClass.provision[]` entry of the AWS module; numbers as strings, as Deckhouse's
/// schema has them (numbers are accepted too).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Provision {
    /// The class name; also a regex removing the defaults it matches.
    pub name: String,
    /// The EBS volume type (gp3, gp2, sc1, st1, io1, io2).
    #[serde(rename = "type")]
    pub volume_type: String,
    /// io1/io2 only.
    #[serde(rename = "iopsPerGB", deserialize_with = "number_or_string")]
    pub iops_per_gb: Option<String>,
    /// gp3 only, 3000–16000.
    #[serde(deserialize_with = "number_or_string")]
    pub iops: Option<String>,
    /// gp3 only, 125–1000 (MiB/s).
    #[serde(deserialize_with = "number_or_string")]
    pub throughput: Option<String>,
}

/// `storage` of the DVP module.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DvpStorage {
    /// Whether the module creates StorageClasses (default true).
    pub enabled: Option<bool>,
    /// `parameters`.
    pub parameters: DvpStorageParameters,
}

/// `storage.parameters` of the DVP module.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DvpStorageParameters {
    /// Anchored regular expressions of parent classes not to offer.
    pub excluded_storage_classes: Vec<String>,
}

fn number_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(serde_json::Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a number or a string, found {}",
            kind(&other)
        ))),
    }
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a map",
        _ => "another value",
    }
}

/// Reads settings from a ModuleConfig's `spec.settings` or a values document; the error names
/// the key at fault (serde's path), never a value. No settings at all are the defaults.
pub fn parse(value: serde_json::Value) -> Result<ModuleSettings, crate::PlanError> {
    if value.is_null() {
        return Ok(ModuleSettings::default());
    }
    serde_json::from_value(value).map_err(|e| {
        crate::PlanError(format!(
            "module settings: {}",
            stratus_runtime::redact::json(&e)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provision_numbers_and_strings_read_alike() {
        let s = parse(json!({"storageClass": {"provision": [
            {"name": "fast", "type": "gp3", "iops": 4000, "throughput": "250"}
        ]}}))
        .unwrap();
        let p = &s.storage_class.provision[0];
        assert_eq!(p.iops.as_deref(), Some("4000"));
        assert_eq!(p.throughput.as_deref(), Some("250"));
        assert!(parse(json!({"storageClass": {"exclude": "x"}})).is_err());
        assert_eq!(
            parse(serde_json::Value::Null).unwrap(),
            ModuleSettings::default()
        );
    }
}
