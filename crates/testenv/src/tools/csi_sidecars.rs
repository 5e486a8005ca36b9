//! The Kubernetes CSI sidecars the drivers' end-to-end tests run against the real apiserver:
//! `csi-provisioner` (`github.com/kubernetes-csi/external-provisioner/v6`), `csi-attacher`
//! (`github.com/kubernetes-csi/external-attacher/v4`) and `csi-resizer`
//! (`github.com/kubernetes-csi/external-resizer/v2`) at pinned versions. Their modules carry
//! `replace` directives, so each is built inside a copy of its module; built once under one lock,
//! cached in `$STRATUS_CACHE/bin` with a stamp each.
//!
//! external-provisioner is pinned at v6.3.0, not v6.4.0: v6.4.0 requires
//! `sigs.k8s.io/sig-storage-lib-external-provisioner/v13` v13.1.0, which the Go module proxy
//! reachable here does not serve, and does not build against v13.0.0 (it uses
//! `controller.VolumeInUseError`, new in v13.1.0). v6.3.0 uses the same client-go (v0.36.1).
//! `replaces` stays for such cases.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::{go, go_build, lock, module_source_copy, progress, stamp_matches};
use crate::tools::install::Paths;

/// One sidecar: its module, version and command package.
#[derive(Debug, Clone, Copy)]
pub struct Sidecar {
    /// The binary's name (`csi-provisioner`).
    pub name: &'static str,
    /// The Go module.
    pub module: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// Dependencies replaced by another version (module, version): ones the proxy does not serve.
    pub replaces: &'static [(&'static str, &'static str)],
}

impl Sidecar {
    fn stamp_value(&self) -> String {
        let mut value = format!("{}@{}", self.module, self.version);
        for (module, version) in self.replaces {
            value.push_str(&format!(" {module}=>{version}"));
        }
        value.push('\n');
        value
    }
}

/// external-provisioner.
pub const PROVISIONER: Sidecar = Sidecar {
    name: "csi-provisioner",
    module: "github.com/kubernetes-csi/external-provisioner/v6",
    version: "v6.3.0",
    replaces: &[],
};

/// external-attacher.
pub const ATTACHER: Sidecar = Sidecar {
    name: "csi-attacher",
    module: "github.com/kubernetes-csi/external-attacher/v4",
    version: "v4.13.0",
    replaces: &[],
};

/// external-resizer.
pub const RESIZER: Sidecar = Sidecar {
    name: "csi-resizer",
    module: "github.com/kubernetes-csi/external-resizer/v2",
    version: "v2.3.0",
    replaces: &[],
};

/// Every sidecar [`ensure_installed`] builds.
pub const ALL: [Sidecar; 3] = [PROVISIONER, ATTACHER, RESIZER];

/// The installed sidecars.
#[derive(Debug, Clone)]
pub struct Sidecars {
    /// `csi-provisioner`.
    pub provisioner: PathBuf,
    /// `csi-attacher`.
    pub attacher: PathBuf,
    /// `csi-resizer`.
    pub resizer: PathBuf,
}

/// Builds whichever sidecar is missing or stale; returns the binaries. Blocking; safe to call
/// from several processes at once.
pub fn ensure_installed() -> Result<Sidecars> {
    let paths = Paths::from_env()?;
    let bin = paths.cache.join("bin");
    let out = |s: &Sidecar| bin.join(s.name);
    let stamp = |s: &Sidecar| bin.join(format!(".stamp-{}", s.name));
    let value = |s: &Sidecar| s.stamp_value();
    let fresh = |s: &Sidecar| stamp_matches(&stamp(s), &value(s), &[&out(s)]);
    if !ALL.iter().all(fresh) {
        let _lock = lock(&paths, "csi-sidecars")?;
        for sidecar in ALL {
            if fresh(&sidecar) {
                continue;
            }
            let src = module_source_copy(&paths, sidecar.module, sidecar.version)?;
            for (module, version) in sidecar.replaces {
                go_mod(
                    &src,
                    &["edit", &format!("-replace={module}={module}@{version}")],
                )?;
                // Records the replacement's checksum in go.sum.
                go_mod(&src, &["download", module])?;
            }
            let took = go_build(
                &paths,
                &src,
                &format!("./cmd/{}", sidecar.name),
                &format!("-s -w -X main.version={}", sidecar.version),
                &out(&sidecar),
                &format!("{} {}", sidecar.name, sidecar.version),
            )?;
            progress(&format!(
                "{} {} built in {} s",
                sidecar.name,
                sidecar.version,
                took.as_secs()
            ));
            fs::write(stamp(&sidecar), value(&sidecar))?;
            // The source copy is only needed for the build.
            let _ = fs::remove_dir_all(&src);
        }
    }
    Ok(Sidecars {
        provisioner: out(&PROVISIONER),
        attacher: out(&ATTACHER),
        resizer: out(&RESIZER),
    })
}

/// `go mod ARGS` inside `dir`, failing with its output.
fn go_mod(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new(go())
        .current_dir(dir)
        .arg("mod")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running go mod {args:?}"))?;
    if !out.status.success() {
        bail!(
            "go mod {args:?} in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
