//! The pod sandbox's `pause` binary, compiled from `build/pause/linux/pause.c` of the pinned
//! `k8s.io/kubernetes` module (the release's own source, from the Go module cache) with the
//! machine's C compiler, statically linked; the real cluster packs it as
//! `registry.k8s.io/pause:3.10.1`, the sandbox image containerd is told to use.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{go, lock, progress, stamp_matches};
use crate::tools::install::{required_version, run_logged, Paths};

/// The pause version the binary reports and its image is tagged with.
pub const VERSION: &str = "3.10.1";

/// The compiled binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.bin_dir().join("pause")
}

#[derive(Deserialize)]
struct Download {
    #[serde(rename = "Dir")]
    dir: Option<PathBuf>,
}

/// Compiles pause unless the stamp records this Kubernetes release and version. Blocking.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let go_mod = fs::read_to_string(super::kubernetes::go_module_dir().join("go.mod"))?;
    let release = required_version(&go_mod, "k8s.io/kubernetes")
        .context("go.mod does not require k8s.io/kubernetes")?;
    let stamp = paths.bin_dir().join(".stamp-pause");
    let value = format!("k8s.io/kubernetes@{release} pause {VERSION}\n");
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "pause")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let spec = format!("k8s.io/kubernetes@{release}");
    let answer = Command::new(go())
        .args(["mod", "download", "-json", &spec])
        .current_dir(super::kubernetes::go_module_dir())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running go mod download {spec}"))?;
    let download: Download = serde_json::from_slice(&answer.stdout)
        .with_context(|| format!("go mod download {spec}: unreadable answer"))?;
    let Some(module) = download.dir else {
        bail!(
            "go mod download {spec} gave no directory: {}",
            String::from_utf8_lossy(&answer.stderr)
        );
    };
    fs::create_dir_all(paths.bin_dir())?;
    progress(&format!("compiling pause {VERSION} from {spec}"));
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    let mut cmd = Command::new("cc");
    cmd.args(["-Os", "-static", "-o"])
        .arg(&tmp)
        .arg(format!("-DVERSION={VERSION}"))
        .arg(module.join("build/pause/linux/pause.c"));
    run_logged(cmd, &paths.install_log, "cc pause.c")?;
    fs::rename(&tmp, &out).with_context(|| format!("moving pause to {}", out.display()))?;
    fs::write(&stamp, value)?;
    Ok(out)
}
