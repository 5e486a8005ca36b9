//! Builds and caches the test environment's tools, each from an exact pin (one module per tool in
//! [`crate::tools`]); this module holds what they share: the cache paths, the install lock, Go
//! builds with stamp files, logged commands.
//!
//! Everything lives in the cache directory (`$STRATUS_CACHE`, default `$HOME/.cache/stratus`).
//! Each tool set has a stamp file recording what it was built from, so a changed pin rebuilds and
//! an unchanged one costs a few `stat`s. An exclusive lock file serialises concurrent callers
//! (several test binaries start at once under `cargo test`). [`ensure_installed`] installs what
//! every test environment needs; a tool only some tests need is installed by [`with_lock`] when
//! they first ask.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

pub use crate::tools::moto::MOTO_REQUIREMENT;

/// Bumped when the build recipe (flags, outputs) changes, to invalidate existing stamps.
const RECIPE_VERSION: &str = "go-build-v2";

/// Locations of the installed tools.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The cache root (`$STRATUS_CACHE` or `$HOME/.cache/stratus`).
    pub cache: PathBuf,
    /// The kube-apiserver binary.
    pub kube_apiserver: PathBuf,
    /// The etcd binary.
    pub etcd: PathBuf,
    /// The helm CLI (the chart tests run it).
    pub helm: PathBuf,
    /// The Python venv holding moto.
    pub venv: PathBuf,
    /// moto's server.
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

    /// Where built binaries go.
    pub fn bin_dir(&self) -> PathBuf {
        self.cache.join("bin")
    }

    /// kube-controller-manager, built with kube-apiserver.
    pub fn kube_controller_manager(&self) -> PathBuf {
        self.bin_dir().join("kube-controller-manager")
    }

    /// kube-scheduler, built with kube-apiserver (the real-cluster suites run it).
    pub fn kube_scheduler(&self) -> PathBuf {
        self.bin_dir().join("kube-scheduler")
    }

    /// kubelet, built with kube-apiserver (the real-cluster suites run it).
    pub fn kubelet(&self) -> PathBuf {
        self.bin_dir().join("kubelet")
    }

    /// kube-proxy, built with kube-apiserver (the real-cluster suites run it).
    pub fn kube_proxy(&self) -> PathBuf {
        self.bin_dir().join("kube-proxy")
    }
}

/// Makes sure etcd, the Kubernetes binaries (control plane, kubelet, kube-proxy), helm and moto are installed in the
/// cache, building them if missing or stale. Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<Paths> {
    with_lock(|paths| {
        crate::tools::kubernetes::ensure(paths)?;
        crate::tools::helm::ensure(paths)?;
        crate::tools::moto::ensure(paths)
    })
}

/// Runs `install` with the install lock held (other processes wait), and returns the paths.
/// Blocking.
pub fn with_lock<T>(install: impl FnOnce(&Paths) -> Result<T>) -> Result<Paths> {
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
    install(&paths)?;
    // The lock is released when `lock` is dropped (closing the file).
    drop(lock);
    Ok(paths)
}

/// Builds every package of `builds` from `module` in ONE `go build` (so the binaries share the
/// compiled packages of their common dependencies and link in parallel) unless every output
/// exists and `stamp` records the module's current go.mod/go.sum (and the recipe version). All
/// take `ldflags` (an `-X` for a package a binary does not link is ignored by the linker), which
/// derive from go.mod and so need no place in the fingerprint; `cgo: false` builds static
/// binaries.
pub(crate) fn ensure_go_build_together(
    paths: &Paths,
    module: &Path,
    stamp: &Path,
    (ldflags, cgo): (&str, bool),
    builds: &[(&Path, &str)],
) -> Result<()> {
    let mut fingerprint = RECIPE_VERSION.as_bytes().to_vec();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        fingerprint.extend(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let stamp_value = format!("{:016x}\n", fnv1a64(&fingerprint));
    if builds.iter().all(|(out, _)| out.is_file())
        && fs::read_to_string(stamp).ok().as_deref() == Some(stamp_value.as_str())
    {
        return Ok(());
    }
    fs::create_dir_all(paths.bin_dir())?;
    // Build into a directory of our own and rename, so a concurrently running binary is never
    // overwritten in place and an interrupted build never leaves a truncated binary.
    let tmp = paths
        .bin_dir()
        .join(format!(".build-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let go = std::env::var_os("STRATUS_GO").unwrap_or_else(|| "go".into());
    let mut cmd = Command::new(&go);
    cmd.current_dir(module)
        .args(["build", "-trimpath", "-ldflags", ldflags, "-o"])
        .arg(format!("{}/", tmp.display()));
    if !cgo {
        cmd.env("CGO_ENABLED", "0");
    }
    let mut packages = Vec::new();
    for (_, package) in builds {
        cmd.arg(package);
        packages.push(*package);
    }
    let result = run_logged(
        cmd,
        &paths.install_log,
        &format!("go build {}", packages.join(" ")),
    );
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    for (out, package) in builds {
        let built = tmp.join(go_binary_name(package));
        fs::rename(&built, out)
            .with_context(|| format!("moving {} to {}", built.display(), out.display()))?;
    }
    let _ = fs::remove_dir_all(&tmp);
    fs::write(stamp, stamp_value).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(())
}

/// The file `go build -o dir/` writes for `package`: its last path element, or the one before a
/// major-version suffix (`go.etcd.io/etcd/server/v3` → `server`).
pub(crate) fn go_binary_name(package: &str) -> &str {
    let mut elements = package.rsplit('/');
    let last = elements.next().unwrap_or(package);
    let is_major_version =
        last.len() > 1 && last.starts_with('v') && last[1..].bytes().all(|b| b.is_ascii_digit());
    if is_major_version {
        elements.next().unwrap_or(last)
    } else {
        last
    }
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
            crate::core::util::log_tail(log, 30)
        );
    }
    Ok(())
}

/// The version of `module` in a go.mod `require` line (`\tk8s.io/kubernetes v1.34.4`).
pub(crate) fn required_version<'a>(go_mod: &'a str, module: &str) -> Option<&'a str> {
    go_mod.lines().find_map(|line| {
        let line = line.trim_start().strip_prefix("require ").unwrap_or(line);
        let mut words = line.split_whitespace();
        (words.next() == Some(module))
            .then(|| words.next())
            .flatten()
    })
}

/// 64-bit FNV-1a: a tiny, stable content fingerprint for stamp files.
pub(crate) fn fnv1a64(data: &[u8]) -> u64 {
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
}
