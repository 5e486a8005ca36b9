//! What to do on the cluster to reach the wanted classes (pure): create the missing, patch the
//! labels, the default annotation and `allowVolumeExpansion` in place, delete and recreate a class
//! whose immutable fields (provisioner, parameters, reclaim policy, binding mode) changed — PVCs
//! keep their class name and stay bound — and delete the module's classes no longer wanted. A
//! class of the same name that is not the module's is left alone and reported.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Map, Value};

use super::{is_module_class, DEFAULT_CLASS_ANNOTATION};
use crate::Cloud;

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Create it.
    Create(StorageClass),
    /// Merge-patch the named class with this body.
    Patch(String, Value),
    /// Delete the named class, then create this one.
    Recreate(StorageClass),
    /// Delete the named class.
    Delete(String),
    /// A class of that name exists and is not the module's.
    Foreign(String),
}

impl Change {
    /// The name of the class the step touches.
    pub fn name(&self) -> &str {
        match self {
            Change::Create(sc) | Change::Recreate(sc) => sc.metadata.name.as_deref().unwrap_or(""),
            Change::Patch(n, _) | Change::Delete(n) | Change::Foreign(n) => n,
        }
    }
}

/// The steps from `actual` (every StorageClass of the cluster) to `wanted`.
pub fn plan_changes(cloud: Cloud, wanted: &[StorageClass], actual: &[StorageClass]) -> Vec<Change> {
    let by_name: BTreeMap<&str, &StorageClass> = actual
        .iter()
        .filter_map(|sc| Some((sc.metadata.name.as_deref()?, sc)))
        .collect();
    let mut changes = Vec::new();
    for w in wanted {
        let name = w.metadata.name.as_deref().unwrap_or_default();
        match by_name.get(name) {
            None => changes.push(Change::Create(w.clone())),
            Some(a) if !is_module_class(cloud, a) => {
                changes.push(Change::Foreign(name.to_string()))
            }
            Some(a) if immutable_differs(w, a) => changes.push(Change::Recreate(w.clone())),
            Some(a) => {
                if let Some(patch) = patch(w, a) {
                    changes.push(Change::Patch(name.to_string(), patch));
                }
            }
        }
    }
    for a in actual.iter().filter(|a| is_module_class(cloud, a)) {
        let name = a.metadata.name.as_deref().unwrap_or_default();
        if !wanted
            .iter()
            .any(|w| w.metadata.name.as_deref() == Some(name))
        {
            changes.push(Change::Delete(name.to_string()));
        }
    }
    changes
}

fn immutable_differs(w: &StorageClass, a: &StorageClass) -> bool {
    let params = |sc: &StorageClass| sc.parameters.clone().unwrap_or_default();
    let reclaim = |sc: &StorageClass| sc.reclaim_policy.clone().unwrap_or_else(|| "Delete".into());
    let binding = |sc: &StorageClass| {
        sc.volume_binding_mode
            .clone()
            .unwrap_or_else(|| "Immediate".into())
    };
    w.provisioner != a.provisioner
        || params(w) != params(a)
        || reclaim(w) != reclaim(a)
        || binding(w) != binding(a)
}

/// The merge patch that brings `a`'s labels (those `w` sets), default annotation and expansion
/// flag to `w`'s; `None` when they already agree.
fn patch(w: &StorageClass, a: &StorageClass) -> Option<Value> {
    let mut metadata = Map::new();
    let actual_labels = a.metadata.labels.clone().unwrap_or_default();
    let labels: Map<String, Value> = w
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, v)| actual_labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let default_of = |sc: &StorageClass| {
        sc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
    };
    if default_of(w) != default_of(a) {
        let value = if default_of(w) {
            json!("true")
        } else {
            Value::Null
        };
        metadata.insert(
            "annotations".into(),
            json!({ DEFAULT_CLASS_ANNOTATION: value }),
        );
    }
    let mut body = Map::new();
    if !metadata.is_empty() {
        body.insert("metadata".into(), Value::Object(metadata));
    }
    let expansion = |sc: &StorageClass| sc.allow_volume_expansion.unwrap_or(false);
    if expansion(w) != expansion(a) {
        body.insert("allowVolumeExpansion".into(), json!(expansion(w)));
    }
    (!body.is_empty()).then_some(Value::Object(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage_classes::{render, Wanted};

    fn wanted(name: &str, t: &str) -> Wanted {
        Wanted {
            name: name.into(),
            parameters: BTreeMap::from([("type".to_string(), t.to_string())]),
            allow_volume_expansion: true,
            reclaim_policy: None,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn nothing_to_do_when_equal() {
        let w = render(
            Cloud::Aws,
            vec![wanted("a", "gp3"), wanted("b", "gp2")],
            None,
            None,
        );
        assert!(plan_changes(Cloud::Aws, &w, &w).is_empty());
    }

    #[test]
    fn each_kind_of_step() {
        let before = render(
            Cloud::Aws,
            vec![
                wanted("a", "gp3"),
                wanted("b", "gp2"),
                wanted("gone", "st1"),
            ],
            None,
            None,
        );
        let mut foreign = render(Cloud::Aws, vec![wanted("theirs", "gp3")], None, None).remove(0);
        foreign.metadata.labels = None;
        let mut actual = before.clone();
        actual.push(foreign);
        // "a" changes type, the default moves to "b" (global default), "theirs" is wanted too.
        let after = render(
            Cloud::Aws,
            vec![
                wanted("a", "io2"),
                wanted("b", "gp2"),
                wanted("theirs", "gp3"),
                wanted("new", "sc1"),
            ],
            Some("b"),
            None,
        );
        let changes = plan_changes(Cloud::Aws, &after, &actual);
        let kinds: Vec<(&str, &str)> = changes
            .iter()
            .map(|c| {
                let k = match c {
                    Change::Create(_) => "create",
                    Change::Patch(..) => "patch",
                    Change::Recreate(_) => "recreate",
                    Change::Delete(_) => "delete",
                    Change::Foreign(_) => "foreign",
                };
                (k, c.name())
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("recreate", "a"),
                ("patch", "b"),
                ("create", "new"),
                ("foreign", "theirs"),
                ("delete", "gone")
            ]
        );
        let Change::Patch(_, body) = &changes[1] else {
            unreachable!()
        };
        assert_eq!(
            body,
            &json!({"metadata": {"annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}})
        );
    }

    #[test]
    fn losing_the_default_removes_the_annotation() {
        let before = render(Cloud::Aws, vec![wanted("a", "gp3")], None, None);
        let after = render(
            Cloud::Aws,
            vec![wanted("a", "gp3")],
            Some("elsewhere"),
            None,
        );
        let changes = plan_changes(Cloud::Aws, &after, &before);
        assert_eq!(
            changes,
            [Change::Patch(
                "a".into(),
                json!({"metadata": {"annotations": {DEFAULT_CLASS_ANNOTATION: null}}})
            )]
        );
    }
}
