//! Running the cloud-controller-manager binary as the shipped identity, with its logs in a file.
// Unsafe code in this file: signals to the CCM process through libc.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use stratus_testenv::{Identity, KubeCluster, TestEnv};

/// Writes a cloud config for `cluster_id` and returns its path.
pub fn write_cloud_config(dir: &Path, cluster_id: &str) -> anyhow::Result<PathBuf> {
    write_cloud_config_with(dir, cluster_id, "")
}

/// Writes a cloud config for `cluster_id` with `more_global` (whole lines) added to `[Global]`,
/// and returns its path.
pub fn write_cloud_config_with(
    dir: &Path,
    cluster_id: &str,
    more_global: &str,
) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("cloud-{cluster_id}.conf"));
    std::fs::write(
        &path,
        format!(
            "[Global]\nRegion = {}\nKubernetesClusterID = {cluster_id}\n{more_global}",
            crate::ec2_fixture::REGION
        ),
    )?;
    Ok(path)
}

/// The binary next to the running executable (same cargo target directory).
pub fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("exe dir")?;
    for candidate in [dir.join(name), dir.join("..").join(name)] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    anyhow::bail!(
        "{name} not found next to {}; build it first (cargo build -p {name})",
        exe.display()
    )
}

/// A running cloud-controller-manager; killed on drop.
pub struct CcmProcess {
    child: Child,
    log: PathBuf,
}

impl CcmProcess {
    /// Starts `bin` with `args`, authenticated as the cloud-controller-manager identity.
    ///
    /// HTTPS is served only when `args` name a `--secure-port`: the upstream default port would
    /// clash between CCMs running side by side.
    pub fn start(bin: &Path, env: &TestEnv, args: &[String]) -> anyhow::Result<CcmProcess> {
        CcmProcess::start_on(bin, env.cluster(), env.aws().env_vars(), args)
    }

    /// Starts `bin` against `cluster` as the cloud-controller-manager identity, with `vars`
    /// (the cloud's endpoint and credentials) in its environment; its log goes to the
    /// cluster's directory.
    pub fn start_on(
        bin: &Path,
        cluster: &KubeCluster,
        vars: Vec<(String, String)>,
        args: &[String],
    ) -> anyhow::Result<CcmProcess> {
        let mut cmd = Command::new(bin);
        if !args.iter().any(|a| a.starts_with("--secure-port")) {
            cmd.arg("--secure-port=0");
        }
        cmd.args(args)
            .arg(format!(
                "--kubeconfig={}",
                cluster
                    .kubeconfig(Identity::CloudControllerManager)
                    .display()
            ))
            .envs(vars)
            .env_remove("KUBECONFIG");
        CcmProcess::spawn(cmd, cluster)
    }

    /// Spawns a prepared command (e.g. the CCM inside an unpacked image, under `chroot`) with
    /// its output in a new log file in the cluster's directory.
    pub fn spawn(mut cmd: Command, cluster: &KubeCluster) -> anyhow::Result<CcmProcess> {
        let n = std::fs::read_dir(cluster.dir())?.count();
        let log = cluster.dir().join(format!("ccm-{n}.log"));
        let out = std::fs::File::create(&log)?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = cmd
            .spawn()
            .with_context(|| format!("start {:?}", cmd.get_program()))?;
        Ok(CcmProcess { child, log })
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Peak resident set size in KiB (VmHWM), while running.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.status_kib("VmHWM:")
    }

    /// Resident set size in KiB now (VmRSS), while running.
    pub fn rss_kib(&self) -> Option<u64> {
        self.status_kib("VmRSS:")
    }

    /// Resident memory now in KiB split as the kernel counts it: heap and stacks (`RssAnon`)
    /// and pages of the binary and libraries (`RssFile`).
    pub fn rss_anon_file_kib(&self) -> Option<(u64, u64)> {
        Some((self.status_kib("RssAnon:")?, self.status_kib("RssFile:")?))
    }

    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    /// Sends SIGTERM (a graceful stop) without waiting.
    pub fn terminate(&self) {
        // SAFETY: kill(2) with a PID we own and a valid signal number has no memory effects.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
    }

    /// Waits until the process has exited.
    pub fn wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.wait().ok()
    }

    /// SIGKILLs the process (a crash: no clean-up, no goodbye) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it has exited (and with what status).
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for CcmProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
