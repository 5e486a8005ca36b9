//! Builds and caches the test environment's tools: kube-apiserver and etcd (from the pinned Go
//! module in `crates/testenv/go`), the helm CLI (from its own pinned Go module in
//! `crates/testenv/go-helm`) and a Python venv with the moto AWS emulator.
//!
//! Everything lives in the cache directory (`$STRATUS_CACHE`, default `$HOME/.cache/stratus`).
//! Each tool set has a stamp file recording what it was built from, so a changed pin rebuilds and
//! an unchanged one costs a few `stat`s. An exclusive lock file serialises concurrent callers
//! (several test binaries start at once under `cargo test`).

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The moto requirement installed into the venv.
pub const MOTO_REQUIREMENT: &str = "moto[server]==5.2.1";

/// Bumped when the build recipe (flags, outputs) changes, to invalidate existing stamps.
const RECIPE_VERSION: &str = "go-build-v2";

/// Locations of the installed tools.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The cache root (`$STRATUS_CACHE` or `$HOME/.cache/stratus`).
    pub cache: PathBuf,
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    /// The helm CLI (the chart tests run it).
    pub helm: PathBuf,
    /// The Python venv holding moto.
    pub venv: PathBuf,
    pub moto_server: PathBuf,
    /// Where go/pip output is appended.
    pub install_log: PathBuf,
}

impl Paths {
    /// The paths for the configured cache directory (nothing is checked or created).
    pub fn from_env() -> Result<Paths> {
        let cache = match std::env::var_os("STRATUS_CACHE") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => {
                let home =
                    std::env::var_os("HOME").context("neither STRATUS_CACHE nor HOME is set")?;
                PathBuf::from(home).join(".cache/stratus")
            }
        };
        let bin = cache.join("bin");
        let venv = cache.join("venv");
        Ok(Paths {
            kube_apiserver: bin.join("kube-apiserver"),
            etcd: bin.join("etcd"),
            helm: bin.join("helm"),
            moto_server: venv.join("bin/moto_server"),
            install_log: cache.join("install.log"),
            venv,
            cache,
        })
    }

    fn bin_dir(&self) -> PathBuf {
        self.cache.join("bin")
    }
}

/// The Go module pinning kube-apiserver and etcd.
pub fn go_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go")
}

/// The Go module pinning helm (separate, so helm's k8s.io/* versions never have to agree with
/// kube-apiserver's).
pub fn helm_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-helm")
}

/// Makes sure kube-apiserver, etcd, helm and moto are installed in the cache, building them if
/// missing or stale. Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<Paths> {
    let paths = Paths::from_env()?;
    fs::create_dir_all(&paths.cache)
        .with_context(|| format!("creating cache dir {}", paths.cache.display()))?;

    let lock_path = paths.cache.join("install.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;

    ensure_go_tools(&paths)?;
    ensure_helm(&paths)?;
    ensure_moto(&paths)?;
    // The lock is released when `lock` is dropped (closing the file).
    drop(lock);
    Ok(paths)
}

fn ensure_go_tools(paths: &Paths) -> Result<()> {
    let module = go_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))?;
    let kubernetes_version = required_version(&go_mod, "k8s.io/kubernetes")
        .context("go.mod does not require k8s.io/kubernetes")?;
    // Without this, `/version` reports `v0.0.0-master+$Format:%H$`.
    let apiserver_ldflags =
        format!("-s -w -X k8s.io/component-base/version.gitVersion={kubernetes_version}");
    ensure_go_builds(
        paths,
        &module,
        &paths.bin_dir().join(".stamp"),
        &[
            GoBuild {
                out: &paths.kube_apiserver,
                package: "k8s.io/kubernetes/cmd/kube-apiserver",
                ldflags: &apiserver_ldflags,
                cgo: true,
            },
            GoBuild {
                out: &paths.etcd,
                package: "go.etcd.io/etcd/server/v3",
                ldflags: "-s -w",
                cgo: true,
            },
        ],
    )
}

fn ensure_helm(paths: &Paths) -> Result<()> {
    let module = helm_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))?;
    let ldflags = helm_ldflags(&go_mod)?;
    ensure_go_builds(
        paths,
        &module,
        &paths.bin_dir().join(".stamp-helm"),
        &[GoBuild {
            out: &paths.helm,
            package: "helm.sh/helm/v3/cmd/helm",
            ldflags: &ldflags,
            // As helm's own Makefile builds it: a static binary.
            cgo: false,
        }],
    )
}

/// The link flags helm's Makefile sets: its version (`helm version`) and the Kubernetes version
/// `helm template` and `helm lint` assume without a cluster (v1.N for k8s.io/client-go v0.N, as
/// the Makefile computes it).
fn helm_ldflags(go_mod: &str) -> Result<String> {
    let helm_version =
        required_version(go_mod, "helm.sh/helm/v3").context("go.mod does not require helm")?;
    let client_go = required_version(go_mod, "k8s.io/client-go")
        .context("go.mod does not require k8s.io/client-go")?;
    let minor = client_go
        .strip_prefix("v0.")
        .and_then(|rest| rest.split('.').next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
        .with_context(|| format!("unexpected k8s.io/client-go version {client_go}"))?;
    let mut flags = format!("-s -w -X helm.sh/helm/v3/internal/version.version={helm_version}");
    for package in ["pkg/chartutil", "pkg/lint/rules"] {
        write!(
            flags,
            " -X helm.sh/helm/v3/{package}.k8sVersionMajor=1 -X helm.sh/helm/v3/{package}.k8sVersionMinor={minor}"
        )?;
    }
    Ok(flags)
}

/// One binary of a Go module.
struct GoBuild<'a> {
    out: &'a Path,
    package: &'a str,
    ldflags: &'a str,
    cgo: bool,
}

/// Builds `builds` from `module` unless every output exists and `stamp` records the module's
/// current go.mod/go.sum (and the recipe version). The link flags are derived from go.mod, so
/// they need no place in the fingerprint (which must stay as it is: other checkouts share the
/// cache, and a changed fingerprint would rebuild kube-apiserver for all of them).
fn ensure_go_builds(paths: &Paths, module: &Path, stamp: &Path, builds: &[GoBuild]) -> Result<()> {
    let mut fingerprint = RECIPE_VERSION.as_bytes().to_vec();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        fingerprint.extend(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let stamp_value = format!("{:016x}\n", fnv1a64(&fingerprint));
    if builds.iter().all(|b| b.out.is_file())
        && fs::read_to_string(stamp).ok().as_deref() == Some(stamp_value.as_str())
    {
        return Ok(());
    }

    fs::create_dir_all(paths.bin_dir())?;
    let go = std::env::var_os("STRATUS_GO").unwrap_or_else(|| "go".into());
    for build in builds {
        // Build next to the target and rename, so a concurrently running binary is never
        // overwritten in place and an interrupted build never leaves a truncated binary.
        let tmp = build
            .out
            .with_extension(format!("tmp-{}", std::process::id()));
        let mut cmd = Command::new(&go);
        cmd.current_dir(module)
            .args(["build", "-trimpath", "-ldflags", build.ldflags, "-o"])
            .arg(&tmp)
            .arg(build.package);
        if !build.cgo {
            cmd.env("CGO_ENABLED", "0");
        }
        let result = run_logged(
            cmd,
            &paths.install_log,
            &format!("go build {}", build.package),
        );
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result?;
        fs::rename(&tmp, build.out)
            .with_context(|| format!("moving {} to {}", tmp.display(), build.out.display()))?;
    }
    fs::write(stamp, stamp_value).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(())
}

fn ensure_moto(paths: &Paths) -> Result<()> {
    let stamp = paths.venv.join(".stratus-stamp");
    let stamp_value = format!("{MOTO_REQUIREMENT}\n");
    if paths.moto_server.is_file()
        && fs::read_to_string(&stamp).ok().as_deref() == Some(stamp_value.as_str())
    {
        return Ok(());
    }

    let venv_python = paths.venv.join("bin/python");
    if !venv_python.is_file() {
        let python = std::env::var_os("STRATUS_PYTHON").unwrap_or_else(|| "python3".into());
        let mut cmd = Command::new(python);
        cmd.args(["-m", "venv"]).arg(&paths.venv);
        run_logged(cmd, &paths.install_log, "python3 -m venv")?;
    }
    let mut cmd = Command::new(&venv_python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        MOTO_REQUIREMENT,
    ]);
    run_logged(
        cmd,
        &paths.install_log,
        &format!("pip install {MOTO_REQUIREMENT}"),
    )?;
    if !paths.moto_server.is_file() {
        bail!(
            "pip install succeeded but {} is missing (see {})",
            paths.moto_server.display(),
            paths.install_log.display()
        );
    }
    fs::write(&stamp, stamp_value).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(())
}

/// Runs `cmd` with stdout and stderr appended to `log`; on failure the error names the log and
/// quotes its tail.
pub(crate) fn run_logged(mut cmd: Command, log: &Path, what: &str) -> Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    writeln!(file, "==> {what}: {cmd:?}")?;
    eprintln!("stratus-testenv: {what} (output in {})", log.display());
    let status = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file.try_clone()?)
        .status()
        .with_context(|| format!("{what}: could not run {cmd:?}"))?;
    if !status.success() {
        drop(file);
        bail!(
            "{what} failed ({status}); see {}:\n{}",
            log.display(),
            crate::util::log_tail(log, 30)
        );
    }
    Ok(())
}

/// The version of `module` in a go.mod `require` line (`\tk8s.io/kubernetes v1.34.4`).
fn required_version<'a>(go_mod: &'a str, module: &str) -> Option<&'a str> {
    go_mod.lines().find_map(|line| {
        let line = line.trim_start().strip_prefix("require ").unwrap_or(line);
        let mut words = line.split_whitespace();
        (words.next() == Some(module))
            .then(|| words.next())
            .flatten()
    })
}

/// 64-bit FNV-1a: a tiny, stable content fingerprint for stamp files.
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_required_versions() {
        let go_mod = "module x\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.6.4\n\tk8s.io/kubernetes v1.34.4\n)\n\nrequire k8s.io/api v0.34.4 // indirect\n";
        assert_eq!(
            required_version(go_mod, "k8s.io/kubernetes"),
            Some("v1.34.4")
        );
        assert_eq!(required_version(go_mod, "k8s.io/api"), Some("v0.34.4"));
        assert_eq!(required_version(go_mod, "k8s.io/nope"), None);
    }

    #[test]
    fn helm_ldflags_carry_versions() {
        let go_mod = "module x\n\nrequire helm.sh/helm/v3 v3.22.0\n\nrequire (\n\tk8s.io/client-go v0.37.1 // indirect\n)\n";
        let flags = helm_ldflags(go_mod).unwrap();
        assert!(
            flags.contains("internal/version.version=v3.22.0"),
            "{flags}"
        );
        assert!(
            flags.contains("pkg/chartutil.k8sVersionMinor=37"),
            "{flags}"
        );
        assert!(
            flags.contains("pkg/lint/rules.k8sVersionMinor=37"),
            "{flags}"
        );
        assert!(helm_ldflags("module x\n").is_err());
    }

    #[test]
    fn real_helm_go_mod_gives_ldflags() {
        let go_mod = fs::read_to_string(helm_module_dir().join("go.mod")).unwrap();
        let flags = helm_ldflags(&go_mod).unwrap();
        assert!(flags.contains("version.version=v3."), "{flags}");
    }

    #[test]
    fn real_go_mod_pins_kubernetes() {
        let go_mod = fs::read_to_string(go_module_dir().join("go.mod")).unwrap();
        let version = required_version(&go_mod, "k8s.io/kubernetes");
        assert!(version.is_some_and(|v| v.starts_with("v1.")), "{version:?}");
    }
}
