//! What a real cluster could leave behind on the host, captured before it starts and after it
//! is torn down: mounts and loop devices of its directory, the host-wide sysctls kubelet and
//! kube-proxy change, the host network's interfaces and iptables chains, the directories
//! kubelet and containerd write by default, and kubelet's cgroups. [`leftovers`] compares two
//! captures (pure); the capture only reads.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

/// Host-wide sysctls kubelet (without `protectKernelDefaults`) or kube-proxy may set.
pub const GLOBAL_SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// Directories kubelet, containerd and the CNI plugins write when not told otherwise.
pub const DEFAULT_PATHS: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
    "/var/lib/cni",
    "/opt/containerd",
    "/run/containerd",
    "/var/lib/containerd",
    "/etc/kubernetes",
];

/// cgroup v1 hierarchies kubelet creates `kubepods` in.
const CGROUP_HIERARCHIES: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "hugetlb",
    "systemd",
];

/// One capture. Every field is a set of human-readable facts; a leftover is a fact present
/// after and not before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostState {
    /// `mount <mount point>` for mounts under the cluster's directory.
    pub mounts: BTreeSet<String>,
    /// `loop <device> <backing file>` for loop devices backed by a file of the directory.
    pub loop_devices: BTreeSet<String>,
    /// `sysctl <name>=<value>`.
    pub sysctls: BTreeSet<String>,
    /// `interface <name>` in the host's network namespace.
    pub interfaces: BTreeSet<String>,
    /// `iptables <rule>` lines of the host naming a Kubernetes or CNI chain.
    pub iptables: BTreeSet<String>,
    /// `path <path>` of the default directories that exist.
    pub paths: BTreeSet<String>,
    /// `cgroup <path>` of kubelet's cgroups.
    pub cgroups: BTreeSet<String>,
}

impl HostState {
    /// Reads the host's state as it concerns a cluster living in `dir`.
    pub fn capture(dir: &Path) -> HostState {
        let dir = dir.display().to_string();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = mount_points(&mountinfo)
            .into_iter()
            .filter(|m| m.starts_with(&dir))
            .map(|m| format!("mount {m}"))
            .collect();
        let loop_devices = loop_devices()
            .into_iter()
            .filter(|(_, file)| file.starts_with(&dir))
            .map(|(dev, file)| format!("loop {dev} {file}"))
            .collect();
        let sysctls = GLOBAL_SYSCTLS
            .iter()
            .filter_map(|name| {
                let value = std::fs::read_to_string(format!("/proc/sys/{name}")).ok()?;
                Some(format!("sysctl {name}={}", value.trim()))
            })
            .collect();
        let interfaces =
            interface_names(&std::fs::read_to_string("/proc/1/net/dev").unwrap_or_default())
                .into_iter()
                .map(|i| format!("interface {i}"))
                .collect();
        let iptables = host_iptables()
            .lines()
            .filter(|l| l.contains("KUBE-") || l.contains("CNI-"))
            .map(|l| format!("iptables {l}"))
            .collect();
        let paths = DEFAULT_PATHS
            .iter()
            .filter(|p| Path::new(p).exists())
            .map(|p| format!("path {p}"))
            .collect();
        let cgroups = CGROUP_HIERARCHIES
            .iter()
            .map(|h| format!("/sys/fs/cgroup/{h}/kubepods"))
            .filter(|p| Path::new(p).exists())
            .map(|p| format!("cgroup {p}"))
            .collect();
        HostState {
            mounts,
            loop_devices,
            sysctls,
            interfaces,
            iptables,
            paths,
            cgroups,
        }
    }

    fn facts(&self) -> impl Iterator<Item = &String> {
        [
            &self.mounts,
            &self.loop_devices,
            &self.sysctls,
            &self.interfaces,
            &self.iptables,
            &self.paths,
            &self.cgroups,
        ]
        .into_iter()
        .flatten()
    }
}

/// The facts of `after` that `before` lacks: what a cluster left behind (a changed sysctl shows
/// with its new value).
pub fn leftovers(before: &HostState, after: &HostState) -> Vec<String> {
    let before: BTreeSet<&String> = before.facts().collect();
    after
        .facts()
        .filter(|fact| !before.contains(fact))
        .cloned()
        .collect()
}

/// The mount points of a `/proc/<pid>/mountinfo` (field 5), octal escapes left as they are.
pub fn mount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(str::to_owned)
        .collect()
}

/// The interface names of a `/proc/<pid>/net/dev`.
pub fn interface_names(net_dev: &str) -> Vec<String> {
    net_dev
        .lines()
        .skip(2)
        .filter_map(|line| line.split(':').next())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// `(device, backing file)` of every attached loop device.
fn loop_devices() -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let file = std::fs::read_to_string(entry.path().join("loop/backing_file")).ok()?;
            Some((format!("/dev/{name}"), file.trim().to_owned()))
        })
        .collect()
}

/// The host network's iptables rules (`iptables-save` run in PID 1's network namespace; it only
/// reads).
fn host_iptables() -> String {
    Command::new("nsenter")
        .args(["--net=/proc/1/ns/net", "iptables-save"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_new_facts_and_changed_values() {
        let mut before = HostState::default();
        before.sysctls.insert("sysctl kernel/panic=1".into());
        before.interfaces.insert("interface lo".into());
        let mut after = before.clone();
        assert!(leftovers(&before, &after).is_empty());
        after.sysctls.clear();
        after.sysctls.insert("sysctl kernel/panic=10".into());
        after.mounts.insert("mount /tmp/x/kubelet".into());
        assert_eq!(
            leftovers(&before, &after),
            vec!["mount /tmp/x/kubelet", "sysctl kernel/panic=10"]
        );
        // Something gone since (an interface another test removed) is not a leftover.
        after.interfaces.clear();
        assert_eq!(leftovers(&before, &after).len(), 2);
    }

    #[test]
    fn reads_mountinfo_and_net_dev() {
        let mountinfo = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n43 27 0:5 / /tmp/c/kubelet rw shared:2 - tmpfs tmpfs rw\n";
        assert_eq!(mount_points(mountinfo), vec!["/", "/tmp/c/kubelet"]);
        let net_dev = "Inter-|   Receive\n face |bytes\n    lo: 1 2 3\n  eth0: 4 5 6\n";
        assert_eq!(interface_names(net_dev), vec!["lo", "eth0"]);
    }
}
