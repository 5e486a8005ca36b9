//! containerd (Debian's 1.6 with runc) for the real cluster: its config with everything under
//! the cluster's directory (root, state, socket, pod network namespaces, CNI state), the bridge
//! CNI network, and image imports with `ctr`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::core::process::{Lifetime, Proc};

/// The sandbox image kubelet's pods start with (built from Kubernetes' `pause.c`).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.1";
/// The pod network of the bridge CNI config.
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The bridge the pods' veths join (its address is the pods' gateway).
pub const BRIDGE: &str = "cni0";
/// The containerd namespace kubelet's containers live in.
pub const NAMESPACE: &str = "k8s.io";

/// A running containerd.
pub struct Containerd {
    socket: PathBuf,
    proc: Proc,
}

impl Containerd {
    /// Writes the config and the CNI network under `dir` and starts containerd; returns once
    /// its socket answers.
    pub async fn start(dir: &Path) -> Result<Containerd> {
        let socket = dir.join("run/containerd.sock");
        for sub in ["run", "cni/net.d", "cni/state"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let config = dir.join("containerd.toml");
        std::fs::write(&config, config_toml(dir, &socket))?;
        std::fs::write(dir.join("cni/net.d/10-stratus.conflist"), cni_conflist(dir))?;
        let mut proc = Proc::spawn(
            "containerd",
            Path::new("containerd"),
            vec![OsString::from("--config"), config.into_os_string()],
            dir.join("containerd.log"),
            Lifetime::Attached,
        )?;
        let probe_socket = socket.clone();
        proc.wait_ready(Duration::from_secs(30), || {
            let socket = probe_socket.clone();
            async move { ctr(&socket, &["version"]).map(drop) }
        })
        .await?;
        Ok(Containerd { socket, proc })
    }

    /// The CRI endpoint kubelet uses (`unix://…`).
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Imports an OCI-layout archive as `<repository>:<tag from the layout>`.
    pub fn import(&self, archive: &Path, repository: &str) -> Result<()> {
        let archive = archive.to_string_lossy();
        ctr(
            &self.socket,
            &["images", "import", "--base-name", repository, &archive],
        )
        .map(drop)
    }

    /// The references of the images containerd holds for kubelet.
    pub fn images(&self) -> Result<Vec<String>> {
        let out = ctr(&self.socket, &["images", "list", "-q"])?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// Kills and removes every container and sandbox left (after kubelet is gone).
    pub fn remove_all_containers(&self) -> Result<()> {
        for id in ctr(&self.socket, &["tasks", "list", "-q"])?.lines() {
            let _ = ctr(&self.socket, &["tasks", "kill", "-s", "SIGKILL", id]);
            let _ = ctr(&self.socket, &["tasks", "delete", "-f", id]);
        }
        for id in ctr(&self.socket, &["containers", "list", "-q"])?.lines() {
            let _ = ctr(&self.socket, &["containers", "delete", id]);
        }
        Ok(())
    }

    /// Stops containerd.
    pub fn stop(&mut self) {
        crate::core::process::stop_all(&mut [&mut self.proc], Duration::from_secs(10));
    }
}

/// Runs `ctr` against `socket` in kubelet's namespace; returns its stdout.
fn ctr(socket: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", NAMESPACE])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running ctr {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ctr {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// containerd 1.6's config: everything under `dir`; `restrict_oom_score_adj` because this
/// machine's root lacks `CAP_SYS_RESOURCE` (lowering a score fails); pod network namespaces
/// under the state dir, not `/var/run/netns`; the plugins that would write outside `dir` or
/// probe file systems we lack disabled.
fn config_toml(dir: &Path, socket: &Path) -> String {
    let dir = dir.display();
    let socket = socket.display();
    format!(
        r#"version = 2
root = "{dir}/containerd/root"
state = "{dir}/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{dir}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{dir}/runc"
"#
    )
}

/// The pod network: a bridge with host-local addresses (their state under `dir`), then portmap.
fn cni_conflist(dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "stratus",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": dir.join("cni/state").display().to_string(),
                    "ranges": [[{ "subnet": POD_CIDR }]],
                    "routes": [{ "dst": format!("{}/0", std::net::Ipv4Addr::UNSPECIFIED) }]
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    })
    .to_string()
}
