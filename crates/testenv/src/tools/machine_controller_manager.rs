//! machine-controller-manager v0.45.0, node-manager's VM controller with the in-tree AWS and
//! OpenStack drivers: built once from its Go module into the cache (the module zip carries only
//! `vendor/modules.txt`, so it builds with `-mod=mod` through the module proxy), and started per
//! test against a test apiserver, its metrics and health on a free 127.0.0.1 port, with the
//! environment a test gives it (the AWS driver cannot be pointed at moto except through an
//! intercepting proxy, see [`crate::core::intercept`]).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::module_crds::MACHINE_CONTROLLER_MANAGER;
use super::{go_build, lock, module_source_copy, progress, stamp_matches};
use crate::core::process::{Lifetime, Proc};
use crate::core::util::free_listeners;
use crate::tools::install::Paths;

/// The manager's package inside the module.
const PACKAGE: &str = "./cmd/machine-controller-manager";

/// The installed binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.cache.join("bin/machine-controller-manager")
}

/// Builds the manager unless the stamp records this version. Blocking; safe to call from
/// several processes at once.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let stamp = paths.cache.join("bin/.stamp-machine-controller-manager");
    let crds = MACHINE_CONTROLLER_MANAGER;
    let value = format!("{}@{} -mod=mod\n", crds.module, crds.version);
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "machine-controller-manager")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let source = {
        let _copy = lock(&paths, "module-crds")?;
        module_source_copy(&paths, crds.module, crds.version)?
    };
    // A private build tree: `-mod=mod` may rewrite go.mod/go.sum, and the shared copy is read
    // by the CRD installer.
    let build = paths
        .cache
        .join(format!("src/.mcm-build-{}", std::process::id()));
    let _ = fs::remove_dir_all(&build);
    copy_without_vendor(&source, &build)?;
    let result = go_build(
        &paths,
        &build,
        PACKAGE,
        "-s -w",
        &out,
        &format!("machine-controller-manager {}", crds.version),
    );
    let _ = fs::remove_dir_all(&build);
    let took = result?;
    progress(&format!(
        "machine-controller-manager {} built in {} s",
        crds.version,
        took.as_secs()
    ));
    fs::write(&stamp, value)?;
    Ok(out)
}

/// Copies the module tree, leaving out `vendor/` (its lone `modules.txt` would force
/// `-mod=vendor`).
fn copy_without_vendor(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if entry.file_name() != "vendor" {
                copy_without_vendor(&entry.path(), &target)?;
            }
        } else if kind.is_file() {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// A running machine-controller-manager; stopped on drop.
pub struct MachineControllerManager {
    _proc: Proc,
    log: PathBuf,
    port: u16,
}

impl MachineControllerManager {
    /// Starts the manager on `kubeconfig` (control and target cluster alike) watching
    /// `namespace`, with `envs` on top of this process's environment; returns once `/healthz`
    /// answers.
    pub async fn start(
        kubeconfig: &Path,
        namespace: &str,
        envs: Vec<(String, String)>,
        dir: &Path,
    ) -> Result<MachineControllerManager> {
        let binary = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("machine-controller-manager build task panicked")??;
        let port = free_listeners(1)?[0].local_addr()?.port();
        let kubeconfig = kubeconfig.display();
        let args: Vec<OsString> = [
            format!("--control-kubeconfig={kubeconfig}"),
            format!("--target-kubeconfig={kubeconfig}"),
            format!("--namespace={namespace}"),
            "--address=127.0.0.1".into(),
            format!("--port={port}"),
            "--leader-elect=false".into(),
            "--safety-up=2".into(),
            "--safety-down=1".into(),
            "--machine-safety-orphan-vms-period=30m".into(),
            "--v=3".into(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        let log = dir.join("machine-controller-manager.log");
        let envs = envs
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        let mut proc = Proc::spawn_with_env(
            "machine-controller-manager",
            &binary,
            args,
            envs,
            log.clone(),
            Lifetime::Attached,
        )?;
        let url = format!("127.0.0.1:{port}");
        proc.wait_ready(Duration::from_secs(60), || healthy(url.clone()))
            .await?;
        Ok(MachineControllerManager {
            _proc: proc,
            log,
            port,
        })
    }

    /// Its metrics and health port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

fn tail(log: &Path) -> String {
    crate::core::util::log_tail(log, 40)
}

/// `GET /healthz` answers 200.
async fn healthy(addr: String) -> Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(&addr).await?;
    stream
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    anyhow::ensure!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "/healthz answered {:?}",
        answer.lines().next().unwrap_or_default()
    );
    Ok(())
}
