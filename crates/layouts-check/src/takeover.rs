//! Taking over a state another tool wrote (Deckhouse's layouts): the state is put beside a layout
//! module, `tofu plan -refresh=false` plans against it and `tofu show -json` reads the plan back.
//! [`PlanSummary`] counts creates, updates, deletes, replacements, moves and forgotten instances
//! (`removed` blocks with `destroy = false`) and names every destructive change with the paths
//! that forced a replacement, so a test can demand that a takeover destroys and replaces nothing.
//!
//! Cloud-independent: the caller gives the module directory (a scratch copy, see
//! [`crate::workspace`]), the variables, the state, and a [`Tofu`] whose CLI config installs the
//! module's providers. Reading the plan ([`PlanSummary::from_plan_json`]) is pure.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::tofu::{Tofu, TofuError};

/// The state file name of the local backend, where `tofu plan` finds the state to take over.
pub const STATE_FILE: &str = "terraform.tfstate";
/// The variables file the harness writes into the module directory.
pub const VARS_FILE: &str = "stratus-takeover.tfvars.json";
/// The saved plan the harness writes into the module directory.
pub const PLAN_FILE: &str = "stratus-takeover.tfplan";

/// Why a takeover plan could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("writing {path}: {source}")]
    /// The state or the variables could not be written.
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    #[error(transparent)]
    /// tofu failed.
    Tofu(#[from] TofuError),
    #[error("the plan JSON is not what tofu show -json prints: {0}")]
    /// The plan does not parse.
    Plan(serde_json::Error),
}

/// What tofu plans for one resource instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The address in the configuration.
    pub address: String,
    /// The address in the state when a `moved` block moved it.
    pub previous_address: Option<String>,
    /// The actions: `no-op`, `create`, `read`, `update`, `delete` (a replacement is
    /// `delete` + `create` in either order), `forget` (dropped from the state, not destroyed).
    pub actions: Vec<String>,
    /// The attribute paths that forced a replacement, each a list of attribute names and keys.
    pub replace_paths: Vec<serde_json::Value>,
    /// tofu's reason for a replacement or a delete, when it gives one.
    pub action_reason: Option<String>,
    /// The planned attributes (`change.after`; unknown ones are absent), `null` for a delete.
    pub after: serde_json::Value,
}

impl Change {
    /// Whether this is a replacement (destroy and create of one instance).
    pub fn is_replace(&self) -> bool {
        self.has("delete") && self.has("create")
    }

    /// Whether this destroys the instance without creating it again.
    pub fn is_delete(&self) -> bool {
        self.has("delete") && !self.has("create")
    }

    /// Whether this creates a new instance (not a replacement).
    pub fn is_create(&self) -> bool {
        self.has("create") && !self.has("delete")
    }

    /// Whether this updates in place.
    pub fn is_update(&self) -> bool {
        self.has("update")
    }

    /// Whether a `removed` block drops the instance from the state without destroying it.
    pub fn is_forget(&self) -> bool {
        self.has("forget")
    }

    /// Whether a `moved` block moved the instance from another address.
    pub fn is_move(&self) -> bool {
        self.previous_address
            .as_deref()
            .is_some_and(|p| p != self.address)
    }

    fn has(&self, action: &str) -> bool {
        self.actions.iter().any(|a| a == action)
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.address, self.actions.join(","))?;
        if let Some(previous) = &self.previous_address {
            write!(f, " moved from {previous}")?;
        }
        if let Some(reason) = &self.action_reason {
            write!(f, " ({reason})")?;
        }
        if !self.replace_paths.is_empty() {
            let paths: Vec<String> = self.replace_paths.iter().map(|p| p.to_string()).collect();
            write!(f, " forced by {}", paths.join(", "))?;
        }
        Ok(())
    }
}

/// How many managed resource instances each kind of change touches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// New instances.
    pub creates: usize,
    /// In-place updates.
    pub updates: usize,
    /// Destroyed instances (not replaced).
    pub deletes: usize,
    /// Replaced instances.
    pub replaces: usize,
    /// Instances a `moved` block moved (they may also be updated).
    pub moves: usize,
    /// Instances a `removed` block drops from the state without destroying them.
    pub forgets: usize,
    /// Instances left as they are.
    pub no_ops: usize,
}

/// The managed-resource changes of one plan (data sources are left out: reading them changes
/// nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSummary {
    /// Every managed resource instance, in tofu's order.
    pub changes: Vec<Change>,
    /// The root module's outputs whose planned values are known.
    pub outputs: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct PlanJson {
    #[serde(default)]
    resource_changes: Vec<ResourceChangeJson>,
    #[serde(default)]
    planned_values: PlannedValuesJson,
}

#[derive(Deserialize, Default)]
struct PlannedValuesJson {
    #[serde(default)]
    outputs: BTreeMap<String, PlannedOutputJson>,
}

#[derive(Deserialize)]
struct PlannedOutputJson {
    #[serde(default)]
    value: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ResourceChangeJson {
    address: String,
    #[serde(default)]
    previous_address: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    change: ChangeJson,
    #[serde(default)]
    action_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChangeJson {
    actions: Vec<String>,
    #[serde(default)]
    after: serde_json::Value,
    #[serde(default)]
    replace_paths: Vec<serde_json::Value>,
}

impl PlanSummary {
    /// Reads the output of `tofu show -json <plan>`.
    pub fn from_plan_json(text: &str) -> Result<PlanSummary, TakeoverError> {
        let plan: PlanJson = serde_json::from_str(text).map_err(TakeoverError::Plan)?;
        let changes = plan
            .resource_changes
            .into_iter()
            .filter(|r| r.mode.as_deref() != Some("data"))
            .map(|r| Change {
                address: r.address,
                previous_address: r.previous_address,
                actions: r.change.actions,
                replace_paths: r.change.replace_paths,
                action_reason: r.action_reason,
                after: r.change.after,
            })
            .collect();
        let outputs = plan
            .planned_values
            .outputs
            .into_iter()
            .filter_map(|(name, o)| o.value.map(|v| (name, v)))
            .collect();
        Ok(PlanSummary { changes, outputs })
    }

    /// The counts of each kind of change.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for c in &self.changes {
            if c.is_replace() {
                counts.replaces += 1;
            } else if c.is_delete() {
                counts.deletes += 1;
            } else if c.is_create() {
                counts.creates += 1;
            } else if c.is_update() {
                counts.updates += 1;
            } else if c.is_forget() {
                counts.forgets += 1;
            } else {
                counts.no_ops += 1;
            }
            if c.is_move() {
                counts.moves += 1;
            }
        }
        counts
    }

    /// Every change that destroys an instance of the state: deletes and replacements.
    pub fn destructive(&self) -> Vec<&Change> {
        self.changes
            .iter()
            .filter(|c| c.is_delete() || c.is_replace())
            .collect()
    }

    /// The changes of one kind, for assertion messages.
    pub fn matching(&self, keep: impl Fn(&Change) -> bool) -> Vec<&Change> {
        self.changes.iter().filter(|c| keep(c)).collect()
    }

    /// The change of the instance at `address` (its address in the configuration).
    pub fn change(&self, address: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.address == address)
    }

    /// The changes of every instance of the resource at `address` (`module.m.aws_subnet.s`
    /// gives `…s[0]`, `…s[1]`, …, or `…s` itself when it has neither count nor for_each).
    pub fn instances(&self, address: &str) -> Vec<&Change> {
        self.changes
            .iter()
            .filter(|c| {
                c.address == address
                    || c.address
                        .strip_prefix(address)
                        .is_some_and(|rest| rest.starts_with('['))
            })
            .collect()
    }
}

impl fmt::Display for PlanSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.changes {
            writeln!(f, "  {c}")?;
        }
        Ok(())
    }
}

/// Plans the module in `module_dir` from nothing (no state): what a first converge would create.
/// `module_dir` must be a scratch copy: the variables and the plan are written into it.
pub fn plan_module(
    tofu: &Tofu,
    module_dir: &Path,
    vars: &serde_json::Value,
) -> Result<PlanSummary, TakeoverError> {
    plan(tofu, module_dir, vars)
}

/// Plans the module in `module_dir` against `state` (a state file's JSON, as the other tool
/// wrote it): `init`, then `plan -refresh=false` with `vars` (the cloud is never asked: the
/// state is taken as it is), then `show -json`. `module_dir` must be a scratch copy: the state,
/// the variables and the plan are written into it.
pub fn plan_takeover(
    tofu: &Tofu,
    module_dir: &Path,
    vars: &serde_json::Value,
    state: &serde_json::Value,
) -> Result<PlanSummary, TakeoverError> {
    write(&module_dir.join(STATE_FILE), &state.to_string())?;
    plan(tofu, module_dir, vars)
}

fn plan(
    tofu: &Tofu,
    module_dir: &Path,
    vars: &serde_json::Value,
) -> Result<PlanSummary, TakeoverError> {
    let vars_file = module_dir.join(VARS_FILE);
    write(&vars_file, &vars.to_string())?;
    tofu.run_ok(module_dir, &["init", "-input=false", "-no-color"])?;
    let var_arg = format!("-var-file={}", vars_file.display());
    let out_arg = format!("-out={PLAN_FILE}");
    tofu.run_ok(
        module_dir,
        &[
            "plan",
            "-refresh=false",
            "-lock=false",
            "-input=false",
            "-no-color",
            &var_arg,
            &out_arg,
        ],
    )?;
    let shown = tofu.run_ok(module_dir, &["show", "-json", "-no-color", PLAN_FILE])?;
    PlanSummary::from_plan_json(&shown.stdout)
}

fn write(path: &Path, text: &str) -> Result<(), TakeoverError> {
    std::fs::write(path, text).map_err(|source| TakeoverError::Write {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(changes: serde_json::Value) -> PlanSummary {
        PlanSummary::from_plan_json(
            &serde_json::json!({ "format_version": "1.2", "resource_changes": changes })
                .to_string(),
        )
        .unwrap()
    }

    fn rc(address: &str, previous: Option<&str>, actions: &[&str]) -> serde_json::Value {
        let mut v = serde_json::json!({
            "address": address,
            "mode": "managed",
            "change": { "actions": actions },
        });
        if let Some(p) = previous {
            v["previous_address"] = p.into();
        }
        v
    }

    #[test]
    fn counts_each_kind_of_change_once() {
        let mut data = rc("data.aws_subnet.g", None, &["read"]);
        data["mode"] = "data".into();
        let summary = plan(serde_json::Value::Array(vec![
            rc("aws_vpc.a", None, &["no-op"]),
            rc(
                "module.vpc.aws_vpc.kube[0]",
                Some("aws_vpc.kube"),
                &["no-op"],
            ),
            rc("aws_subnet.b[0]", Some("aws_subnet.old[0]"), &["update"]),
            rc("aws_subnet.c", None, &["create"]),
            rc("aws_subnet.d", None, &["delete"]),
            rc("aws_instance.e", None, &["delete", "create"]),
            rc("aws_instance.f", None, &["create", "delete"]),
            rc("aws_eip.g", None, &["forget"]),
            data,
        ]));
        assert_eq!(
            summary.counts(),
            Counts {
                creates: 1,
                updates: 1,
                deletes: 1,
                replaces: 2,
                moves: 2,
                forgets: 1,
                no_ops: 2,
            }
        );
        let destructive: Vec<&str> = summary
            .destructive()
            .iter()
            .map(|c| c.address.as_str())
            .collect();
        assert_eq!(
            destructive,
            ["aws_subnet.d", "aws_instance.e", "aws_instance.f"]
        );
        assert_eq!(summary.changes.len(), 8, "data sources are left out");
    }

    #[test]
    fn a_previous_address_equal_to_the_address_is_no_move() {
        let summary = plan(serde_json::json!([rc(
            "aws_vpc.a",
            Some("aws_vpc.a"),
            &["no-op"]
        )]));
        assert_eq!(summary.counts().moves, 0);
        assert!(summary.destructive().is_empty());
    }

    #[test]
    fn display_names_the_move_and_the_reason() {
        let mut replaced = rc(
            "aws_subnet.b[0]",
            Some("aws_subnet.old[0]"),
            &["delete", "create"],
        );
        replaced["action_reason"] = "replace_because_cannot_update".into();
        replaced["change"]["replace_paths"] = serde_json::json!([["cidr_block"]]);
        let summary = plan(serde_json::json!([replaced]));
        let text = summary.to_string();
        assert!(text.contains("aws_subnet.b[0] [delete,create] moved from aws_subnet.old[0] (replace_because_cannot_update) forced by [\"cidr_block\"]"), "{text}");
    }

    #[test]
    fn a_plan_without_changes_is_empty_and_garbage_is_refused() {
        assert_eq!(
            PlanSummary::from_plan_json("{\"format_version\":\"1.2\"}").unwrap(),
            PlanSummary::default()
        );
        assert!(matches!(
            PlanSummary::from_plan_json("not json"),
            Err(TakeoverError::Plan(_))
        ));
    }
}
