//! Tearing a [`RealCluster`] down so nothing stays on the host: workloads deleted before the
//! DaemonSets that may serve their volumes (a CSI node plugin must unmount what it mounted),
//! the processes stopped in reverse start order, leftover containers removed, then every mount
//! and loop device of the cluster's directory released, kubelet's cgroups removed and the
//! host-wide sysctls kubelet changed put back. The network namespace goes with the test.
// umount2(2) has no safe wrapper in the crates we use.
#![allow(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Result;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};

use crate::core::process::stop_all;
use crate::node::cluster::RealCluster;
use crate::node::host_state::{leftovers, mount_points, HostState, DEFAULT_PATHS, GLOBAL_SYSCTLS};

/// How long deleted pods may take to go.
const POD_DELETE_DEADLINE: Duration = Duration::from_secs(90);

impl RealCluster {
    /// Deletes the workloads (DaemonSets last), waits for their pods to go, then stops and
    /// cleans everything, and fails naming anything left on the host (a mount, a loop device,
    /// a changed sysctl, an interface, an iptables rule, a default directory, a cgroup).
    /// Cleanup runs even when draining fails.
    pub async fn teardown(mut self) -> Result<()> {
        let drained = self.drain().await;
        self.stop_and_clean();
        let left = leftovers(&self.host_before, &HostState::capture(&self.dir));
        drained?;
        if !left.is_empty() {
            anyhow::bail!("the real cluster left on the host: {}", left.join("; "));
        }
        Ok(())
    }

    async fn drain(&self) -> Result<()> {
        let client = self.client().await?;
        let all = DeleteParams::background();
        let lp = ListParams::default();
        macro_rules! delete_all {
            ($kind:ty) => {{
                let api: Api<$kind> = Api::all(client.clone());
                for object in api.list(&lp).await? {
                    let ns = object.metadata.namespace.clone().unwrap_or_default();
                    let name = object.metadata.name.clone().unwrap_or_default();
                    let _ = Api::<$kind>::namespaced(client.clone(), &ns)
                        .delete(&name, &all)
                        .await;
                }
            }};
        }
        delete_all!(Deployment);
        delete_all!(StatefulSet);
        delete_all!(ReplicaSet);
        delete_all!(Job);
        let pods: Api<Pod> = Api::all(client.clone());
        let not_daemon = |pod: &Pod| {
            !pod.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet")
        };
        self.delete_pods_until_gone(&pods, not_daemon).await?;
        delete_all!(DaemonSet);
        self.delete_pods_until_gone(&pods, |_| true).await
    }

    async fn delete_pods_until_gone(
        &self,
        pods: &Api<Pod>,
        which: impl Fn(&Pod) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + POD_DELETE_DEADLINE;
        loop {
            let left: Vec<Pod> = pods
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter(|p| which(p))
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            for pod in &left {
                if pod.metadata.deletion_timestamp.is_none() {
                    let ns = pod.metadata.namespace.clone().unwrap_or_default();
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let _ = Api::<Pod>::namespaced(pods.clone().into_client(), &ns)
                        .delete(&name, &DeleteParams::default())
                        .await;
                }
            }
            if Instant::now() >= deadline {
                let names: Vec<String> = left
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                anyhow::bail!(
                    "pods still there {POD_DELETE_DEADLINE:?} after deletion: {}; kubelet log:\n{}",
                    names.join(", "),
                    self.log("kubelet", 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops every process and removes what they left (blocking; also run on drop).
    pub(crate) fn stop_and_clean(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        while let Some(mut proc) = self.procs.pop() {
            stop_all(&mut [&mut proc], Duration::from_secs(15));
        }
        if let Some(mut containerd) = self.containerd.take() {
            if let Err(err) = containerd.remove_all_containers() {
                eprintln!("stratus-testenv: removing containers: {err:#}");
            }
            containerd.stop();
        }
        unmount_under(&self.dir);
        crate::node::loops::detach_under(&self.dir);
        // Paths kubelet and containerd hard-code (device plugins, container log links, shim
        // sockets, the CNI cache, the flex-volume dir): removed when this cluster made them.
        for path in DEFAULT_PATHS {
            if !self.host_before.paths.contains(&format!("path {path}")) && Path::new(path).exists()
            {
                unmount_under(Path::new(path));
                if let Err(err) = std::fs::remove_dir_all(path) {
                    eprintln!("stratus-testenv: removing {path}: {err}");
                }
            }
        }
        remove_kubelet_cgroups();
        restore_sysctls(&self.sysctls);
        if let Err(err) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("stratus-testenv: removing {}: {err}", self.dir.display());
        }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        self.stop_and_clean();
    }
}

/// The host-wide sysctls kubelet may change, as they are now.
pub(crate) fn read_sysctls() -> Vec<(String, String)> {
    GLOBAL_SYSCTLS
        .iter()
        .filter_map(|name| {
            let value = std::fs::read_to_string(format!("/proc/sys/{name}")).ok()?;
            Some(((*name).to_owned(), value.trim().to_owned()))
        })
        .collect()
}

fn restore_sysctls(saved: &[(String, String)]) {
    for (name, value) in saved {
        let path = format!("/proc/sys/{name}");
        if std::fs::read_to_string(&path)
            .ok()
            .as_deref()
            .map(str::trim)
            != Some(value)
        {
            if let Err(err) = std::fs::write(&path, value) {
                eprintln!("stratus-testenv: restoring {name}={value}: {err}");
            }
        }
    }
}

/// Unmounts every mount point under `dir`, deepest first (lazily: a mount still busy goes
/// once its last user does).
fn unmount_under(dir: &Path) {
    let prefix = dir.display().to_string();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = mount_points(&mountinfo)
        .into_iter()
        .filter(|m| m.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for point in points {
        let Ok(c_point) = std::ffi::CString::new(unescape_mountinfo(&point)) else {
            continue;
        };
        // A point mounted several times (kubelet's rshared bind onto itself) needs one umount
        // each; stop when it is no longer a mount point.
        for _ in 0..8 {
            // SAFETY: a NUL-terminated path; umount2 touches no memory of ours.
            if unsafe { libc::umount2(c_point.as_ptr(), libc::MNT_DETACH) } != 0 {
                break;
            }
        }
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mountinfo(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Removes kubelet's `kubepods` cgroup trees (its containers are gone by now), children first.
fn remove_kubelet_cgroups() {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for hierarchy in hierarchies.flatten() {
        remove_cgroup_tree(&hierarchy.path().join("kubepods"));
    }
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(children) = std::fs::read_dir(dir) {
        for child in children.flatten() {
            if child.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&child.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
