//! What capdvp changes on a running DVP machine in place, as a pure decision over the current and
//! desired DeckhouseMachine spec (or a template's `spec.template.spec`).
//!
//! In place: `runPolicy` and `liveMigrationPolicy` — both are fields of the parent
//! VirtualMachine that DVP applies without restarting the VM, so the node keeps running.
//! Everything else needs a rolling replacement, which drains the node first:
//! - `vmClassName`, `cpu`, `memory`: DVP applies them only when the VM restarts, and a restart
//!   of a node that was not drained stops its workloads abruptly;
//! - `bootDiskImageRef`, `bootloader`, `rootDiskSize`, `rootDiskStorageClass`: the boot disk is
//!   made once, from the image, when the machine is made;
//! - `additionalDisks`: the disks are made with the VM;
//! - any field capdvp does not know.
//!
//! `providerID` is never a reason of its own: it names the VM, it does not describe it.

use serde_json::{Map, Value};

/// Spec fields changed in place.
pub const IN_PLACE: [&str; 2] = ["runPolicy", "liveMigrationPolicy"];
/// Spec fields the decision never looks at.
const IGNORED: [&str; 1] = ["providerID"];

/// The decision for one current/desired pair.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// The in-place fields that change, with their desired values (`null`: removed).
    pub covered: Map<String, Value>,
    /// The changes left to a rollout, each with its reason.
    pub rollout: Vec<String>,
}

impl Verdict {
    /// A one-line summary for the hook's `message`.
    pub fn message(&self) -> String {
        let covered: Vec<&str> = self.covered.keys().map(String::as_str).collect();
        match (covered.is_empty(), self.rollout.is_empty()) {
            (true, true) => "no DeckhouseMachine spec change".into(),
            (false, true) => format!("in place: {}", covered.join(", ")),
            (true, false) => format!("needs a rollout: {}", self.rollout.join("; ")),
            (false, false) => format!(
                "in place: {}; needs a rollout: {}",
                covered.join(", "),
                self.rollout.join("; ")
            ),
        }
    }
}

/// Why a change of `field` is left to a rollout.
pub fn rollout_reason(field: &str) -> &'static str {
    match field {
        "vmClassName" | "cpu" | "memory" => {
            "DVP applies it only on a VM restart; a rollout drains the node first"
        }
        "bootDiskImageRef" | "bootloader" | "rootDiskSize" | "rootDiskStorageClass" => {
            "the boot disk is made once, when the machine is made"
        }
        "additionalDisks" => "disks are made with the machine",
        _ => "not a field capdvp changes in place",
    }
}

/// Compares two spec objects (`null` or a non-object counts as empty).
pub fn classify(current: &Value, desired: &Value) -> Verdict {
    let empty = Map::new();
    let current = current.as_object().unwrap_or(&empty);
    let desired = desired.as_object().unwrap_or(&empty);
    let mut fields: Vec<&String> = current.keys().chain(desired.keys()).collect();
    fields.sort();
    fields.dedup();
    let mut verdict = Verdict::default();
    for field in fields {
        let (was, will) = (current.get(field), desired.get(field));
        if was == will || IGNORED.contains(&field.as_str()) {
            continue;
        }
        if IN_PLACE.contains(&field.as_str()) {
            verdict
                .covered
                .insert(field.clone(), will.cloned().unwrap_or(Value::Null));
        } else {
            verdict
                .rollout
                .push(format!("{field} ({})", rollout_reason(field)));
        }
    }
    verdict
}

/// `spec.<path…>` of `object`, or `null`.
pub fn spec_at<'a>(object: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(&object["spec"], |v, key| &v[*key])
}

/// The merge patch setting `covered` at `spec.<path…>`; `None` when nothing is covered.
pub fn merge_patch(covered: &Map<String, Value>, path: &[&str]) -> Option<Value> {
    if covered.is_empty() {
        return None;
    }
    let inner = path
        .iter()
        .rev()
        .fold(Value::Object(covered.clone()), |v, key| {
            let mut m = Map::new();
            m.insert((*key).to_string(), v);
            Value::Object(m)
        });
    let mut top = Map::new();
    top.insert("spec".into(), inner);
    Some(Value::Object(top))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "vmClassName": "generic",
            "cpu": {"cores": 4, "fraction": "100%"},
            "memory": "8Gi",
            "rootDiskSize": "20Gi",
            "bootDiskImageRef": {"kind": "ClusterVirtualImage", "name": "ubuntu"},
            "runPolicy": "AlwaysOnUnlessStoppedManually",
        })
    }

    fn with(changes: Value) -> Value {
        let mut v = base();
        for (k, value) in changes.as_object().unwrap() {
            if value.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = value.clone();
            }
        }
        v
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            desired: Value,
            covered: Value,
            rollout: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "no change",
                desired: base(),
                covered: json!({}),
                rollout: &[],
            },
            Case {
                name: "run policy",
                desired: with(json!({"runPolicy": "AlwaysOn"})),
                covered: json!({"runPolicy": "AlwaysOn"}),
                rollout: &[],
            },
            Case {
                name: "live migration policy added",
                desired: with(json!({"liveMigrationPolicy": "PreferForced"})),
                covered: json!({"liveMigrationPolicy": "PreferForced"}),
                rollout: &[],
            },
            Case {
                name: "run policy removed (back to the default)",
                desired: with(json!({"runPolicy": null})),
                covered: json!({"runPolicy": null}),
                rollout: &[],
            },
            Case {
                name: "cpu and memory",
                desired: with(json!({"cpu": {"cores": 8, "fraction": "100%"}, "memory": "16Gi"})),
                covered: json!({}),
                rollout: &["cpu", "memory"],
            },
            Case {
                name: "class and policy together",
                desired: with(json!({"vmClassName": "highmem", "runPolicy": "AlwaysOn"})),
                covered: json!({"runPolicy": "AlwaysOn"}),
                rollout: &["vmClassName"],
            },
            Case {
                name: "image, disk, bootloader",
                desired: with(json!({
                    "bootDiskImageRef": {"kind": "ClusterVirtualImage", "name": "ubuntu-24"},
                    "rootDiskSize": "40Gi",
                    "bootloader": "EFI",
                })),
                covered: json!({}),
                rollout: &["bootDiskImageRef", "bootloader", "rootDiskSize"],
            },
            Case {
                name: "an additional disk",
                desired: with(json!({"additionalDisks": [{"size": "10Gi"}]})),
                covered: json!({}),
                rollout: &["additionalDisks"],
            },
            Case {
                name: "an unknown field",
                desired: with(json!({"gpu": 1})),
                covered: json!({}),
                rollout: &["gpu"],
            },
            Case {
                name: "providerID only",
                desired: with(json!({"providerID": "dvp://m-1"})),
                covered: json!({}),
                rollout: &[],
            },
        ];
        for case in cases {
            let v = classify(&base(), &case.desired);
            assert_eq!(
                Value::Object(v.covered.clone()),
                case.covered,
                "{}",
                case.name
            );
            let fields: Vec<&str> = v
                .rollout
                .iter()
                .map(|r| r.split(' ').next().unwrap())
                .collect();
            assert_eq!(fields, case.rollout, "{}", case.name);
        }
    }

    #[test]
    fn messages_and_patches() {
        let v = classify(
            &base(),
            &with(json!({"memory": "16Gi", "runPolicy": "AlwaysOn"})),
        );
        assert_eq!(
            v.message(),
            "in place: runPolicy; needs a rollout: memory (DVP applies it only on a VM restart; a rollout drains the node first)"
        );
        assert_eq!(
            merge_patch(&v.covered, &[]),
            Some(json!({"spec": {"runPolicy": "AlwaysOn"}}))
        );
        assert_eq!(
            merge_patch(&v.covered, &["template", "spec"]),
            Some(json!({"spec": {"template": {"spec": {"runPolicy": "AlwaysOn"}}}}))
        );
        assert_eq!(merge_patch(&Map::new(), &[]), None);
        assert_eq!(
            classify(&base(), &base()).message(),
            "no DeckhouseMachine spec change"
        );
        let object = json!({"spec": {"template": {"spec": {"memory": "1Gi"}}}});
        assert_eq!(
            spec_at(&object, &["template", "spec"]),
            &json!({"memory": "1Gi"})
        );
        assert_eq!(spec_at(&json!({}), &[]), &Value::Null);
    }
}
