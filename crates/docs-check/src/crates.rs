//! The crate table of the docs (`docs/src/architecture.md`) against the workspace as
//! `cargo metadata` reports it: every package with its path and binaries, nothing more.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The page holding the crate table, relative to the repository root.
pub const TABLE_PAGE: &str = "docs/src/architecture.md";

/// One workspace package: its directory relative to the root and its binary targets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Package {
    /// Directory of its Cargo.toml, relative to the repository root.
    pub path: String,
    /// Names of its binary targets, sorted.
    pub bins: Vec<String>,
}

/// The workspace's packages by name, from `cargo metadata --no-deps` run in `root`.
pub fn workspace(root: &Path) -> Result<BTreeMap<String, Package>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run {cargo} metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let root_dir = meta["workspace_root"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut packages = BTreeMap::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let manifest = p["manifest_path"].as_str().unwrap_or_default();
        let dir = Path::new(manifest)
            .parent()
            .and_then(|d| d.strip_prefix(&root_dir).ok())
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut bins: Vec<String> = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "bin"))
            })
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        bins.sort();
        packages.insert(
            p["name"].as_str().unwrap_or_default().to_string(),
            Package { path: dir, bins },
        );
    }
    Ok(packages)
}

fn code_items(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The crate table's rows: `| `name` | `path` | `bin`, … | what it is |`. Rows whose first
/// cell is not a single code span (the header, prose tables) are skipped.
pub fn table(markdown: &str) -> BTreeMap<String, Package> {
    let mut rows = BTreeMap::new();
    for line in markdown.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 4 {
            continue;
        }
        let names = code_items(cells[0]);
        let paths = code_items(cells[1]);
        if names.len() != 1 || paths.len() != 1 || !cells[0].starts_with('`') {
            continue;
        }
        let mut bins = code_items(cells[2]);
        bins.sort();
        rows.insert(
            names[0].clone(),
            Package {
                path: paths[0].clone(),
                bins,
            },
        );
    }
    rows
}

/// What differs between the workspace and the table, one message each.
pub fn compare(
    workspace: &BTreeMap<String, Package>,
    table: &BTreeMap<String, Package>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, package) in workspace {
        match table.get(name) {
            None => problems.push(format!(
                "`{name}` ({}) has no row in {TABLE_PAGE}",
                package.path
            )),
            Some(row) if row != package => problems.push(format!(
                "`{name}`: the table says path `{}`, binaries {:?}; cargo metadata says `{}`, {:?}",
                row.path, row.bins, package.path, package.bins
            )),
            Some(_) => {}
        }
    }
    for name in table.keys().filter(|n| !workspace.contains_key(*n)) {
        problems.push(format!(
            "`{name}` is in {TABLE_PAGE} but not in the workspace"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_and_differences_named() {
        let md = "| crate | path | binaries | what |\n|---|---|---|---|\n\
                  | `a` | `crates/a` | | lib |\n| `b` | `bins/b` | `b`, `b2` | bin |\n\
                  | `gone` | `crates/gone` | | old |\n";
        let rows = table(md);
        assert_eq!(rows["b"].bins, vec!["b".to_string(), "b2".to_string()]);
        let mut ws = BTreeMap::new();
        ws.insert(
            "a".to_string(),
            Package {
                path: "crates/a".into(),
                bins: vec![],
            },
        );
        ws.insert(
            "b".to_string(),
            Package {
                path: "bins/b".into(),
                bins: vec!["b".into()],
            },
        );
        ws.insert(
            "new".to_string(),
            Package {
                path: "crates/new".into(),
                bins: vec![],
            },
        );
        let problems = compare(&ws, &rows);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("`b`: the table says"));
        assert!(problems[1].contains("`new` (crates/new) has no row"));
        assert!(problems[2].contains("`gone` is in"));
    }
}
