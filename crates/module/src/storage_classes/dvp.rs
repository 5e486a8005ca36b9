//! DVP: one class per enabled parent StorageClass of the discovery data, its name sanitised,
//! `parameters.dvpStorageClass` the parent's name, reclaim policy and expansion copied, minus the
//! anchored `storage.parameters.excludedStorageClasses`; a class the parent stops reporting is
//! kept as it is; nothing when `storage.enabled` is false.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use serde::Deserialize;

use super::{compile_excludes, excluded, from_existing, is_module_class, sanitize_name, Wanted};
use crate::settings::ModuleSettings;
use crate::{Cloud, PlanError};

/// One parent class as the discovery data lists it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentClass {
    /// The parent's name.
    pub name: String,
    /// `Delete` or `Retain`.
    #[serde(default)]
    pub reclaim_policy: Option<String>,
    /// Whether volumes may grow.
    #[serde(default)]
    pub allow_volume_expansion: bool,
    /// Whether the tenant may use it (default true).
    #[serde(default = "yes")]
    pub is_enabled: bool,
    /// The tenant's default.
    #[serde(default)]
    pub is_default: bool,
}

fn yes() -> bool {
    true
}

/// The DVP module's classes and the module's default (the first parent default), given the
/// parent classes of the discovery data (`None`: no discovery data).
pub fn plan_dvp(
    settings: &ModuleSettings,
    parents: Option<&[ParentClass]>,
    existing: &[StorageClass],
) -> Result<(Vec<Wanted>, Option<String>), PlanError> {
    if settings.storage.enabled == Some(false) {
        return Ok((Vec::new(), None));
    }
    let excludes = compile_excludes(
        "storage.parameters.excludedStorageClasses",
        &settings.storage.parameters.excluded_storage_classes,
        true,
    )?;
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut default = None;
    for p in parents.unwrap_or_default().iter().filter(|p| p.is_enabled) {
        let name = sanitize_name(&p.name);
        if name.is_empty() || excluded(&excludes, &p.name) || wanted.iter().any(|w| w.name == name)
        {
            continue;
        }
        if p.is_default && default.is_none() {
            default = Some(name.clone());
        }
        wanted.push(Wanted {
            name,
            parameters: BTreeMap::from([("dvpStorageClass".to_string(), p.name.clone())]),
            allow_volume_expansion: p.allow_volume_expansion,
            reclaim_policy: Some(p.reclaim_policy.clone().unwrap_or_else(|| "Delete".into())),
            labels: BTreeMap::new(),
        });
    }
    for kept in existing
        .iter()
        .filter(|sc| is_module_class(Cloud::Dvp, sc))
        .filter_map(|sc| from_existing(Cloud::Dvp, sc))
    {
        if !wanted.iter().any(|w| w.name == kept.name) {
            wanted.push(kept);
        }
    }
    Ok((wanted, default))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage_classes::render;

    fn parent(name: &str, default: bool) -> ParentClass {
        ParentClass {
            name: name.into(),
            reclaim_policy: Some("Retain".into()),
            allow_volume_expansion: true,
            is_enabled: true,
            is_default: default,
        }
    }

    #[test]
    fn vanished_parent_classes_are_kept_and_disabled_ones_skipped() {
        let before = plan_dvp(
            &ModuleSettings::default(),
            Some(&[parent("Old", false), parent("b", true)]),
            &[],
        )
        .unwrap();
        let existing = render(Cloud::Dvp, before.0, None, before.1.as_deref());
        let mut off = parent("c", false);
        off.is_enabled = false;
        let (w, default) = plan_dvp(
            &ModuleSettings::default(),
            Some(&[parent("b", true), off]),
            &existing,
        )
        .unwrap();
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["b", "old"]);
        assert_eq!(default.as_deref(), Some("b"));
        let old = w.iter().find(|w| w.name == "old").unwrap();
        assert_eq!(old.parameters["dvpStorageClass"], "Old");
        assert_eq!(old.reclaim_policy.as_deref(), Some("Retain"));
    }

    #[test]
    fn storage_disabled_means_no_classes() {
        let mut s = ModuleSettings::default();
        s.storage.enabled = Some(false);
        assert!(plan_dvp(&s, Some(&[parent("a", true)]), &[])
            .unwrap()
            .0
            .is_empty());
    }
}
