//! Pure decisions of a run: the catalog's order, which disks are orphaned, and whether an output
//! must be created, replaced or left alone (writes only on change).

use std::collections::BTreeSet;

use crate::types::{CloudCondition, DiskMeta, InstanceType};

/// What to do with one output object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAction {
    /// It does not exist: create it.
    Create,
    /// It exists with other content: replace it.
    Replace,
    /// It exists with this content (or need not exist): no request.
    Skip,
}

/// Compares the stored content (`None`: the object does not exist) with the desired one.
pub fn write_action<T: PartialEq + ?Sized>(stored: Option<&T>, desired: &T) -> WriteAction {
    match stored {
        None => WriteAction::Create,
        Some(s) if s == desired => WriteAction::Skip,
        Some(_) => WriteAction::Replace,
    }
}

/// The conditions ConfigMap: as [`write_action`], except that no ConfigMap is created for zero
/// conditions (Deckhouse's behaviour).
pub fn conditions_action(stored: Option<&String>, conditions: &[CloudCondition]) -> WriteAction {
    if stored.is_none() && conditions.is_empty() {
        return WriteAction::Skip;
    }
    write_action(stored, &conditions_json(conditions))
}

/// The `conditions` key of the ConfigMap: a JSON array of `{name,message,ok}`.
pub fn conditions_json(conditions: &[CloudCondition]) -> String {
    serde_json::to_string(conditions).unwrap_or_else(|_| "[]".to_owned())
}

/// The catalog's `instanceTypes`: sorted by name, one entry per name (the first wins).
pub fn catalog(mut types: Vec<InstanceType>) -> Vec<InstanceType> {
    types.sort_by(|a, b| a.name.cmp(&b.name));
    types.dedup_by(|b, a| a.name == b.name);
    types
}

/// The disks no PersistentVolume names, sorted by id. The backend returns only this cluster's
/// disks, so a disk of another cluster is never here.
pub fn orphaned_disks(disks: &[DiskMeta], pv_names: &BTreeSet<String>) -> Vec<DiskMeta> {
    let mut orphaned: Vec<DiskMeta> = disks
        .iter()
        .filter(|d| !pv_names.contains(&d.name))
        .cloned()
        .collect();
    orphaned.sort();
    orphaned.dedup();
    orphaned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, cpu: &str) -> InstanceType {
        InstanceType {
            name: name.into(),
            cpu: cpu.into(),
            memory: "1Mi".into(),
            root_disk: "0".into(),
        }
    }

    fn d(id: &str, name: &str) -> DiskMeta {
        DiskMeta {
            id: id.into(),
            name: name.into(),
        }
    }

    #[test]
    fn write_actions() {
        assert_eq!(write_action(None, &1), WriteAction::Create);
        assert_eq!(write_action(Some(&1), &1), WriteAction::Skip);
        assert_eq!(write_action(Some(&2), &1), WriteAction::Replace);
        let c = CloudCondition {
            name: "quota".into(),
            message: "ok".into(),
            ok: true,
        };
        assert_eq!(conditions_action(None, &[]), WriteAction::Skip);
        assert_eq!(
            conditions_action(None, std::slice::from_ref(&c)),
            WriteAction::Create
        );
        assert_eq!(
            conditions_action(Some(&"[]".to_owned()), &[]),
            WriteAction::Skip
        );
        assert_eq!(
            conditions_action(Some(&"[]".to_owned()), std::slice::from_ref(&c)),
            WriteAction::Replace
        );
        assert_eq!(
            conditions_json(&[c]),
            r#"[{"name":"quota","message":"ok","ok":true}]"#
        );
    }

    #[test]
    fn catalog_is_sorted_and_unique() {
        let c = catalog(vec![
            t("m5.large", "2"),
            t("c5.xlarge", "4"),
            t("m5.large", "9"),
        ]);
        let names: Vec<_> = c
            .iter()
            .map(|t| (t.name.as_str(), t.cpu.as_str()))
            .collect();
        assert_eq!(names, vec![("c5.xlarge", "4"), ("m5.large", "2")]);
        assert_eq!(
            serde_json::to_value(&c[0]).unwrap(),
            serde_json::json!({"name":"c5.xlarge","cpu":"4","memory":"1Mi","rootDisk":"0"})
        );
    }

    #[test]
    fn orphans_are_disks_without_a_pv() {
        let pvs: BTreeSet<String> = ["pvc-a".to_owned(), "pvc-c".to_owned()].into();
        let cases = [
            (vec![], vec![]),
            (vec![d("vol-1", "pvc-a")], vec![]),
            (
                vec![d("vol-2", "pvc-b"), d("vol-1", "pvc-a")],
                vec![d("vol-2", "pvc-b")],
            ),
            (
                vec![d("vol-3", ""), d("vol-2", "pvc-b"), d("vol-2", "pvc-b")],
                vec![d("vol-2", "pvc-b"), d("vol-3", "")],
            ),
        ];
        for (disks, want) in cases {
            assert_eq!(orphaned_disks(&disks, &pvs), want, "{disks:?}");
        }
    }
}
