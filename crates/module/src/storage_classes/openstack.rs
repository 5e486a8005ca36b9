//! OpenStack: one class per Cinder volume type of the discovery data (`volumeTypes[].name`), its
//! name sanitised as Deckhouse does, `parameters.type` the type's own name, minus the anchored
//! `storageClass.exclude[]`; without discovery data the module's existing classes stay.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;

use super::{compile_excludes, excluded, from_existing, is_module_class, Wanted};
use crate::settings::ModuleSettings;
use crate::{Cloud, PlanError};

/// A volume type's (or parent class's) name as a StorageClass name: letters, digits, `.` and
/// `-` kept, lower-cased; a space becomes `-`; everything else dropped; `-` and `.` trimmed.
pub fn sanitize_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    kept.trim_matches(|c| c == '-' || c == '.').to_string()
}

/// The OpenStack module's classes; `volume_types` is `None` when there is no discovery data.
pub fn plan_openstack(
    settings: &ModuleSettings,
    volume_types: Option<&[String]>,
    existing: &[StorageClass],
) -> Result<Vec<Wanted>, PlanError> {
    let excludes = compile_excludes(
        "storageClass.exclude",
        &settings.storage_class.exclude,
        true,
    )?;
    let Some(types) = volume_types else {
        return Ok(existing
            .iter()
            .filter(|sc| is_module_class(Cloud::OpenStack, sc))
            .filter_map(|sc| from_existing(Cloud::OpenStack, sc))
            .collect());
    };
    let expansion = settings.supports_online_disk_resize.unwrap_or(false);
    let mut sorted: Vec<&String> = types.iter().collect();
    sorted.sort();
    let mut wanted: Vec<Wanted> = Vec::with_capacity(sorted.len());
    for t in sorted {
        let name = sanitize_name(t);
        if name.is_empty() || excluded(&excludes, &name) || wanted.iter().any(|w| w.name == name) {
            continue;
        }
        wanted.push(Wanted {
            name,
            parameters: BTreeMap::from([("type".to_string(), t.clone())]),
            allow_volume_expansion: expansion,
            reclaim_policy: None,
            labels: BTreeMap::new(),
        });
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_as_deckhouse_does() {
        assert_eq!(sanitize_name("SSD Fast"), "ssd-fast");
        assert_eq!(sanitize_name("__DEFAULT__"), "default");
        assert_eq!(sanitize_name("-ceph.hdd_r3-"), "ceph.hddr3");
        assert_eq!(sanitize_name("ы"), "");
    }

    #[test]
    fn anchored_exclude_and_types_kept_verbatim() {
        let settings = ModuleSettings {
            storage_class: crate::settings::StorageClassSettings {
                exclude: vec!["ssd".into(), "hdd-.*".into()],
                ..Default::default()
            },
            supports_online_disk_resize: Some(true),
            ..Default::default()
        };
        let types: Vec<String> = ["SSD Fast", "ssd", "hdd-slow", "__DEFAULT__", "###"]
            .map(String::from)
            .to_vec();
        let w = plan_openstack(&settings, Some(&types), &[]).unwrap();
        let got: Vec<(&str, &str)> = w
            .iter()
            .map(|w| (w.name.as_str(), w.parameters["type"].as_str()))
            .collect();
        assert_eq!(got, [("ssd-fast", "SSD Fast"), ("default", "__DEFAULT__")]);
        assert!(w.iter().all(|w| w.allow_volume_expansion));
    }
}
