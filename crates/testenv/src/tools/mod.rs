//! One module per installed tool: what it is built from and how. kube-apiserver, etcd, helm and
//! moto are installed for every test environment (see [`crate::tools::install`]); the others only when
//! a suite that needs them first asks (OpenTofu with its OpenStack provider and the hashicorp/aws and hashicorp/kubernetes stand-ins, the virtualization
//! CRDs, Keystone with uWSGI and openstacksdk, amazon-ec2-metadata-mock, crane, the Cluster API manager, proxy.py as a real forward proxy): built on first use, cached under `$STRATUS_CACHE` with a stamp each, serialised by a
//! lock file per tool so a long build never blocks the shared `install.lock`. The helpers below
//! serve those on-demand builds (progress heartbeat, module source copies).

pub mod apt;
pub mod aws_schema;
pub mod cluster_api;
pub mod connect_proxy;
pub mod crane;
pub mod csi_sanity;
pub mod csi_sidecars;
pub mod ec2_metadata_mock;
pub mod helm;
pub mod install;
pub mod keystone;
pub mod kube_controller_manager;
pub mod kubernetes;
pub mod kubernetes_schema;
pub mod machine_controller_manager;
pub mod module_crds;
pub mod moto;
pub mod node_runtime;
pub mod opentofu;
pub mod pause;
pub mod stand_in;
pub mod virtualization_crds;
pub mod xfsprogs;

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::tools::install::Paths;

/// How often a running build reports that it is still going.
const HEARTBEAT: Duration = Duration::from_secs(60);

/// Progress for a person watching `cargo test` or `make test`: written to the process's stderr
/// directly, so libtest's output capture (which only sees `eprintln!`) does not hide it.
pub(crate) fn progress(message: &str) {
    let _ = writeln!(std::io::stderr(), "stratus-testenv: {message}");
}

/// An exclusive lock on `$STRATUS_CACHE/<name>.lock`, released on drop.
pub(crate) fn lock(paths: &Paths, name: &str) -> Result<File> {
    fs::create_dir_all(&paths.cache)
        .with_context(|| format!("creating cache dir {}", paths.cache.display()))?;
    let path = paths.cache.join(format!("{name}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// Whether `stamp` holds exactly `value` and every output exists.
pub(crate) fn stamp_matches(stamp: &Path, value: &str, outputs: &[&Path]) -> bool {
    outputs.iter().all(|o| o.exists()) && fs::read_to_string(stamp).ok().as_deref() == Some(value)
}

/// The `go` binary (`$STRATUS_GO` or `go`).
pub(crate) fn go() -> std::ffi::OsString {
    std::env::var_os("STRATUS_GO").unwrap_or_else(|| "go".into())
}

#[derive(Deserialize)]
struct Download {
    #[serde(rename = "Dir")]
    dir: Option<PathBuf>,
    #[serde(rename = "Error")]
    error: Option<String>,
}

/// Downloads `module@version` through the Go module proxy and copies its source to
/// `$STRATUS_CACHE/src/<last path element>@<version>` (writable: modules with `replace`
/// directives must be built inside their own tree, not with `go install`). Returns the copy.
pub(crate) fn module_source_copy(paths: &Paths, module: &str, version: &str) -> Result<PathBuf> {
    let name = module.rsplit('/').next().unwrap_or(module);
    let copy = paths.cache.join("src").join(format!("{name}@{version}"));
    let done = copy.join(".stratus-copied");
    if done.is_file() {
        return Ok(copy);
    }
    let spec = format!("{module}@{version}");
    progress(&format!("downloading {spec} from the Go module proxy"));
    let out = Command::new(go())
        .args(["mod", "download", "-json", &spec])
        .current_dir(&paths.cache)
        .env("GO111MODULE", "on")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running go mod download {spec}"))?;
    let download: Download = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "go mod download {spec}: unreadable answer: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let dir = match (download.dir, download.error) {
        (_, Some(error)) => bail!("go mod download {spec}: {error}"),
        (Some(dir), None) if out.status.success() => dir,
        _ => bail!(
            "go mod download {spec} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    if copy.exists() {
        fs::remove_dir_all(&copy).with_context(|| format!("removing {}", copy.display()))?;
    }
    copy_tree(&dir, &copy)?;
    fs::write(&done, "").with_context(|| format!("writing {}", done.display()))?;
    Ok(copy)
}

/// Copies a directory tree; files come out writable whatever the source's mode (the module
/// cache is read-only).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).with_context(|| {
                format!("copying {} to {}", entry.path().display(), target.display())
            })?;
            let mut perms = fs::metadata(&target)?.permissions();
            perms.set_mode(perms.mode() | 0o200);
            fs::set_permissions(&target, perms)?;
        }
    }
    Ok(())
}

/// One `go build` of `package` inside `module_dir` into `out` (through a temporary file and a
/// rename, so a reader never sees half a binary). Output goes to the install log; a heartbeat
/// with the elapsed time is printed every minute. Returns how long it took.
pub(crate) fn go_build(
    paths: &Paths,
    module_dir: &Path,
    package: &str,
    ldflags: &str,
    out: &Path,
    what: &str,
) -> Result<Duration> {
    if let Some(parent) = out.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.install_log)
        .with_context(|| format!("opening {}", paths.install_log.display()))?;
    let mut cmd = Command::new(go());
    cmd.current_dir(module_dir)
        .args(["build", "-trimpath", "-ldflags", ldflags, "-o"])
        .arg(&tmp)
        .arg(package)
        // Providers and tofu are released as static binaries; so are ours.
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    writeln!(log, "==> {what}: {cmd:?}")?;
    progress(&format!(
        "building {what} (first time only; output in {})",
        paths.install_log.display()
    ));
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("{what}: could not run {cmd:?}"))?;
    let mut next_beat = HEARTBEAT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() >= next_beat {
            progress(&format!(
                "still building {what} ({} s so far)",
                started.elapsed().as_secs()
            ));
            next_beat += HEARTBEAT;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let took = started.elapsed();
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        drop(log);
        bail!(
            "{what} failed ({status}); see {}:\n{}",
            paths.install_log.display(),
            crate::core::util::log_tail(&paths.install_log, 30)
        );
    }
    fs::rename(&tmp, out)
        .with_context(|| format!("moving {} to {}", tmp.display(), out.display()))?;
    progress(&format!("built {what} in {} s", took.as_secs()));
    Ok(took)
}

/// The Go platform of this machine (`linux_amd64`), as provider mirrors name it.
pub(crate) fn go_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{}_{arch}", std::env::consts::OS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_trees_are_writable_and_platforms_use_go_names() {
        let base = std::env::temp_dir().join(format!("stratus-copy-tree-{}", std::process::id()));
        let from = base.join("from");
        fs::create_dir_all(from.join("sub")).unwrap();
        let file = from.join("sub/go.mod");
        fs::write(&file, "module x\n").unwrap();
        let mut perms = fs::metadata(&file).unwrap().permissions();
        perms.set_mode(0o444);
        fs::set_permissions(&file, perms).unwrap();

        copy_tree(&from, &base.join("to")).unwrap();
        let copied = base.join("to/sub/go.mod");
        assert_eq!(fs::read_to_string(&copied).unwrap(), "module x\n");
        assert_ne!(
            fs::metadata(&copied).unwrap().permissions().mode() & 0o200,
            0
        );
        fs::remove_dir_all(&base).unwrap();

        assert!(go_platform().contains('_'), "{}", go_platform());
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert_eq!(go_platform(), "linux_amd64");
        }
    }
}
