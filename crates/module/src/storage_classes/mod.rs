//! The StorageClasses a module wants, per cloud (pure): AWS from its four defaults and
//! `storageClass.provision[]`, OpenStack one per Cinder volume type of the discovery data, DVP one
//! per enabled parent class; then the default-class rule and what to change on the cluster.

mod aws;
mod changes;
pub mod dvp;
mod openstack;

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::ObjectMeta;
use regex::Regex;

pub use aws::plan_aws;
pub use changes::{plan_changes, Change};
pub use dvp::plan_dvp;
pub use openstack::{plan_openstack, sanitize_name};

use crate::{Cloud, PlanError};

/// The annotation that makes a class the cluster's default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// A class the module wants, before the default-class rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    /// Name.
    pub name: String,
    /// `parameters`.
    pub parameters: BTreeMap<String, String>,
    /// `allowVolumeExpansion`.
    pub allow_volume_expansion: bool,
    /// `reclaimPolicy` (`None`: the API's default, Delete).
    pub reclaim_policy: Option<String>,
    /// Extra labels besides the module's.
    pub labels: BTreeMap<String, String>,
}

/// Which class gets the default annotation: `global` is the cluster-wide default
/// (`defaultClusterStorageClass`), `module` the module's own choice (its deprecated
/// `storageClass.default`, or DVP's parent default). A cluster-wide default annotates only the
/// class of that exact name; else the module's choice; else the first class by name.
pub fn default_class<'a>(
    names: &'a [String],
    global: Option<&str>,
    module: Option<&str>,
) -> Option<&'a str> {
    let pick = |wanted: &str| names.iter().find(|n| *n == wanted).map(String::as_str);
    match global.filter(|g| !g.is_empty()) {
        Some(global) => pick(global),
        None => match module.filter(|m| !m.is_empty()) {
            Some(module) => pick(module),
            None => names.first().map(String::as_str),
        },
    }
}

/// The StorageClass objects for `wanted` (sorted by name), with the default annotation on the
/// class [`default_class`] picks.
pub fn render(
    cloud: Cloud,
    mut wanted: Vec<Wanted>,
    global_default: Option<&str>,
    module_default: Option<&str>,
) -> Vec<StorageClass> {
    wanted.sort_by(|a, b| a.name.cmp(&b.name));
    wanted.dedup_by(|a, b| a.name == b.name);
    let names: Vec<String> = wanted.iter().map(|w| w.name.clone()).collect();
    let default = default_class(&names, global_default, module_default).map(str::to_owned);
    wanted
        .into_iter()
        .map(|w| {
            let mut labels = cloud.module_labels();
            labels.extend(w.labels);
            let annotations = (default.as_deref() == Some(w.name.as_str())).then(|| {
                BTreeMap::from([(DEFAULT_CLASS_ANNOTATION.to_string(), "true".to_string())])
            });
            StorageClass {
                metadata: ObjectMeta {
                    name: Some(w.name),
                    labels: Some(labels),
                    annotations,
                    ..ObjectMeta::default()
                },
                provisioner: cloud.provisioner().to_string(),
                parameters: Some(w.parameters),
                allow_volume_expansion: Some(w.allow_volume_expansion),
                reclaim_policy: w.reclaim_policy,
                volume_binding_mode: Some("WaitForFirstConsumer".into()),
                ..StorageClass::default()
            }
        })
        .collect()
}

/// Compiles exclude patterns; `anchored` wraps each in `^(…)$`. A pattern that does not compile
/// is an error naming its key and position.
pub fn compile_excludes(
    key: &str,
    patterns: &[String],
    anchored: bool,
) -> Result<Vec<Regex>, PlanError> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let source = if anchored {
                format!("^(?:{p})$")
            } else {
                p.clone()
            };
            Regex::new(&source).map_err(|_| {
                PlanError::key(&format!("{key}[{i}]"), "not a valid regular expression")
            })
        })
        .collect()
}

/// Whether any of `excludes` matches `name`.
pub fn excluded(excludes: &[Regex], name: &str) -> bool {
    excludes.iter().any(|r| r.is_match(name))
}

/// A class the module made earlier, as wanted again unchanged (a source that is gone keeps it).
pub fn from_existing(cloud: Cloud, sc: &StorageClass) -> Option<Wanted> {
    let name = sc.metadata.name.clone()?;
    let own = cloud.module_labels();
    let labels = sc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !own.contains_key(k))
        .collect();
    Some(Wanted {
        name,
        parameters: sc.parameters.clone().unwrap_or_default(),
        allow_volume_expansion: sc.allow_volume_expansion.unwrap_or(false),
        reclaim_policy: sc.reclaim_policy.clone(),
        labels,
    })
}

/// Whether `sc` carries the module's labels.
pub fn is_module_class(cloud: Cloud, sc: &StorageClass) -> bool {
    let labels = sc.metadata.labels.as_ref();
    cloud
        .module_labels()
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn default_rule() {
        let n = names(&["a", "b"]);
        assert_eq!(default_class(&n, None, None), Some("a"));
        assert_eq!(default_class(&n, Some(""), Some("b")), Some("b"));
        assert_eq!(default_class(&n, Some("b"), Some("a")), Some("b"));
        assert_eq!(default_class(&n, Some("other-module-class"), None), None);
        assert_eq!(default_class(&n, None, Some("gone")), None);
        assert_eq!(default_class(&[], None, None), None);
    }

    #[test]
    fn excludes_anchored_or_not() {
        let un = compile_excludes("exclude", &names(&["gp"]), false).unwrap();
        let an = compile_excludes("exclude", &names(&["gp"]), true).unwrap();
        assert!(excluded(&un, "gp3"));
        assert!(!excluded(&an, "gp3"));
        assert!(excluded(&an, "gp"));
        let err = compile_excludes("storageClass.exclude", &names(&["ok", "("]), true).unwrap_err();
        assert_eq!(
            err.0,
            "storageClass.exclude[1]: not a valid regular expression"
        );
    }
}
