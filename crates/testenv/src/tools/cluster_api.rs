//! The real Cluster API core manager (`sigs.k8s.io/cluster-api` v1.14.2, package
//! `sigs.k8s.io/cluster-api/core`) and its CRDs (`core/config/crd/bases/` of the same module),
//! for the capdvp suites. The module has `replace` lines, so it is built through the wrapper
//! module `crates/testenv/go-capi` (requiring `sigs.k8s.io/cluster-api` and
//! `sigs.k8s.io/cluster-api/api` at one release, with a `tool` directive). Built on first use,
//! cached in `$STRATUS_CACHE/cluster-api/` with a stamp, under its own lock.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{go, go_build, lock, progress, stamp_matches};
use crate::install::{fnv1a64, required_version, Paths};

/// The main package of the manager.
pub const PACKAGE: &str = "sigs.k8s.io/cluster-api/core";
/// The module.
pub const MODULE: &str = "sigs.k8s.io/cluster-api";

/// The installed manager and CRDs.
#[derive(Debug, Clone)]
pub struct ClusterApi {
    /// The manager binary.
    pub manager: PathBuf,
    /// The directory of CRD YAML files.
    pub crds: PathBuf,
    /// The release (`v1.14.2`).
    pub version: String,
}

/// The wrapper module.
pub fn module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-capi")
}

#[derive(Deserialize)]
struct ModuleInfo {
    #[serde(rename = "Dir")]
    dir: Option<PathBuf>,
}

/// Builds the manager and copies the CRDs unless the stamp records this wrapper's go.mod and
/// go.sum. Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<ClusterApi> {
    let paths = Paths::from_env()?;
    let module = module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))
        .with_context(|| format!("reading {}", module.join("go.mod").display()))?;
    let go_sum = fs::read_to_string(module.join("go.sum")).unwrap_or_default();
    let version =
        required_version(&go_mod, MODULE).context("go-capi/go.mod does not require cluster-api")?;
    let root = paths.cache.join("cluster-api");
    let out = root.join("bin/cluster-api-manager");
    let crds = root.join("crds");
    let stamp = root.join(".stamp");
    let value = format!(
        "{MODULE}@{version} {:016x}\n",
        fnv1a64(format!("{go_mod}\0{go_sum}").as_bytes())
    );
    let done = ClusterApi {
        manager: out.clone(),
        crds: crds.clone(),
        version: version.to_string(),
    };
    if stamp_matches(&stamp, &value, &[&out, &crds]) {
        return Ok(done);
    }
    let _lock = lock(&paths, "cluster-api")?;
    if stamp_matches(&stamp, &value, &[&out, &crds]) {
        return Ok(done);
    }
    let took = go_build(
        &paths,
        &module,
        PACKAGE,
        &format!("-s -w -X sigs.k8s.io/cluster-api/version.gitVersion={version}"),
        &out,
        &format!("cluster-api manager {version}"),
    )?;
    progress(&format!(
        "cluster-api manager {version} built in {} s",
        took.as_secs()
    ));
    let listed = Command::new(go())
        .current_dir(&module)
        .args(["list", "-m", "-json", MODULE])
        .stdin(Stdio::null())
        .output()
        .context("go list -m sigs.k8s.io/cluster-api")?;
    if !listed.status.success() {
        bail!(
            "go list -m {MODULE}: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
    }
    let info: ModuleInfo = serde_json::from_slice(&listed.stdout)?;
    let source = info
        .dir
        .context("go list gave no module directory")?
        .join("core/config/crd/bases");
    let _ = fs::remove_dir_all(&crds);
    fs::create_dir_all(&crds)?;
    for entry in fs::read_dir(&source).with_context(|| format!("reading {}", source.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            fs::copy(&path, crds.join(path.file_name().unwrap_or_default()))?;
        }
    }
    fs::write(&stamp, value)?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_pins_both_modules_at_one_release_with_the_tool() {
        let text = fs::read_to_string(module_dir().join("go.mod")).unwrap();
        let core = required_version(&text, MODULE).unwrap();
        let api = required_version(&text, "sigs.k8s.io/cluster-api/api").unwrap();
        assert_eq!(core, api);
        assert_eq!(core, "v1.14.2");
        assert!(text.contains(&format!("tool {PACKAGE}")), "{text}");
    }
}
