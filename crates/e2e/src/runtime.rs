//! How a container really runs on the node, read from the host's `/proc`: its process's user,
//! effective capabilities, no-new-privileges flag and whether its root file system is mounted
//! read-only, compared with what its pod's security context asks for — so a suite checks what
//! the runtime did with the chart's settings, not only what the pod spec says. Host-network
//! pods share the test's network namespace, which tells this test's containers from any other
//! on the machine; a pod on the pod network is found by its container's ID in the cgroup path.

use std::path::Path;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Pod;

/// What the kernel says about a container's main process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessView {
    /// The process ID on the host.
    pub pid: u32,
    /// Real, effective, saved and file-system user IDs (`Uid:` of `status`).
    pub uids: Vec<u32>,
    /// Effective capabilities (`CapEff:`).
    pub cap_eff: u64,
    /// `NoNewPrivs:` is 1.
    pub no_new_privs: bool,
    /// The mount at `/` is read-only.
    pub read_only_root: bool,
}

/// Which users a container may run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// Exactly this user ID (`runAsUser`).
    Exactly(u32),
    /// Any user but root (`runAsNonRoot` without `runAsUser`).
    NonRoot,
    /// The image's user, whatever it is.
    Any,
}

/// What a container's security context (over its pod's) asks the runtime for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// The user.
    pub user: User,
    /// `readOnlyRootFilesystem: true`.
    pub read_only_root: bool,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privs: bool,
    /// `capabilities.drop: [ALL]` with nothing added, not privileged.
    pub no_capabilities: bool,
}

impl Expected {
    /// What the spec of `pod` asks for its container `container`.
    pub fn of(pod: &Pod, container: &str) -> Result<Expected> {
        let spec = pod.spec.as_ref().context("the pod has no spec")?;
        let found = spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .with_context(|| format!("the pod has no container {container}"))?;
        let own = found.security_context.clone().unwrap_or_default();
        let pod_level = spec.security_context.clone().unwrap_or_default();
        let uid = own.run_as_user.or(pod_level.run_as_user);
        let non_root = own.run_as_non_root.or(pod_level.run_as_non_root) == Some(true);
        let user = match uid {
            Some(uid) => User::Exactly(u32::try_from(uid).context("runAsUser out of range")?),
            None if non_root => User::NonRoot,
            None => User::Any,
        };
        let caps = own.capabilities.unwrap_or_default();
        Ok(Expected {
            user,
            read_only_root: own.read_only_root_filesystem == Some(true),
            no_new_privs: own.allow_privilege_escalation == Some(false),
            no_capabilities: own.privileged != Some(true)
                && caps.drop.unwrap_or_default().iter().any(|c| c == "ALL")
                && caps.add.unwrap_or_default().is_empty(),
        })
    }
}

impl ProcessView {
    /// Where the process runs otherwise than `expected` says (empty: as asked).
    pub fn problems(&self, expected: &Expected) -> Vec<String> {
        let mut problems = Vec::new();
        let users_ok = !self.uids.is_empty()
            && match expected.user {
                User::Exactly(uid) => self.uids.iter().all(|u| *u == uid),
                User::NonRoot => self.uids.iter().all(|u| *u != 0),
                User::Any => true,
            };
        if !users_ok {
            problems.push(format!("user IDs {:?}, not {:?}", self.uids, expected.user));
        }
        if expected.no_capabilities && self.cap_eff != 0 {
            problems.push(format!("effective capabilities {:#x}", self.cap_eff));
        }
        if expected.no_new_privs && !self.no_new_privs {
            problems.push("may gain privileges (NoNewPrivs 0)".into());
        }
        if expected.read_only_root && !self.read_only_root {
            problems.push("root file system writable".into());
        }
        problems
    }
}

/// The process whose program is named `program` (the last part of its `argv[0]`) in the
/// calling thread's network namespace.
pub fn host_network_process(program: &str) -> Result<ProcessView> {
    let own = std::fs::read_link("/proc/thread-self/ns/net").context("reading our netns")?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").context("listing /proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        // Processes may end while we look: skip what cannot be read.
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        if argv0_name(&cmdline) != Some(program) {
            continue;
        }
        if std::fs::read_link(dir.join("ns/net")).ok().as_ref() != Some(&own) {
            continue;
        }
        found.push(read_view(pid, &dir)?);
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("no process {program} runs in this network namespace"),
        n => bail!("{n} processes {program} run in this network namespace, expected one"),
    }
}

/// The main process (the lowest process ID: the one the runtime started) of the container
/// `container` of `pod`, in any network namespace, found by the container's ID — the last part
/// of its cgroup path — so a pod on the pod network is told from every other process on the
/// machine.
pub fn container_process(pod: &Pod, container: &str) -> Result<ProcessView> {
    let id = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.name == container)
        .and_then(|c| c.container_id.as_deref())
        .and_then(|id| id.split_once("://").map(|(_, id)| id.to_owned()))
        .with_context(|| format!("the pod's status has no container ID of {container}"))?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").context("listing /proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Processes may end while we look: skip what cannot be read.
        let Ok(cgroup) = std::fs::read_to_string(entry.path().join("cgroup")) else {
            continue;
        };
        if in_container(&cgroup, &id) {
            found.push(read_view(pid, &entry.path())?);
        }
    }
    found.sort_by_key(|view| view.pid);
    found
        .into_iter()
        .next()
        .with_context(|| format!("no process is in the cgroup of container {container} ({id})"))
}

/// Whether a `/proc/<pid>/cgroup` text puts the process in the container `id` (a cgroup path
/// ending in the ID, as the kubelet's cgroupfs driver and containerd name them).
pub fn in_container(cgroup: &str, id: &str) -> bool {
    !id.is_empty()
        && cgroup.lines().any(|line| {
            line.splitn(3, ':')
                .nth(2)
                .and_then(|path| path.rsplit('/').next())
                == Some(id)
        })
}

fn read_view(pid: u32, dir: &Path) -> Result<ProcessView> {
    let status = std::fs::read_to_string(dir.join("status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let mountinfo = std::fs::read_to_string(dir.join("mountinfo"))
        .with_context(|| format!("reading /proc/{pid}/mountinfo"))?;
    let mut view = parse_status(pid, &status)?;
    view.read_only_root = root_read_only(&mountinfo)
        .with_context(|| format!("/proc/{pid}/mountinfo has no mount at /"))?;
    Ok(view)
}

/// The last path component of the first NUL-separated argument.
pub fn argv0_name(cmdline: &[u8]) -> Option<&str> {
    let first = cmdline.split(|b| *b == 0).next()?;
    let name = std::str::from_utf8(first).ok()?.rsplit('/').next()?;
    (!name.is_empty()).then_some(name)
}

/// The user IDs, capabilities and no-new-privileges flag of a `status` file (the root mount is
/// left false for [`root_read_only`] to fill).
pub fn parse_status(pid: u32, status: &str) -> Result<ProcessView> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .with_context(|| format!("/proc/{pid}/status has no {name}"))
    };
    let uids = field("Uid")?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u32>, _>>()
        .with_context(|| format!("/proc/{pid}/status: bad Uid"))?;
    let cap_eff = u64::from_str_radix(field("CapEff")?, 16)
        .with_context(|| format!("/proc/{pid}/status: bad CapEff"))?;
    Ok(ProcessView {
        pid,
        uids,
        cap_eff,
        no_new_privs: field("NoNewPrivs")? == "1",
        read_only_root: false,
    })
}

/// Whether the last mount at `/` in a `mountinfo` text (the one the process sees) is read-only;
/// None when nothing is mounted at `/`.
pub fn root_read_only(mountinfo: &str) -> Option<bool> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let mount_point = fields.nth(4)?;
            let options = fields.next()?;
            (mount_point == "/").then(|| options.split(',').any(|o| o == "ro"))
        })
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcloud-controlle\nUid:\t65532\t65532\t65532\t65532\nGid:\t65532\t65532\t65532\t65532\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n";

    #[test]
    fn a_container_is_found_by_the_end_of_its_cgroup_path() {
        let cgroup = "4:memory:/kubepods/besteffort/pod0f1e/abc123\n1:cpu:/kubepods/besteffort/pod0f1e/abc123\n0::/\n";
        assert!(in_container(cgroup, "abc123"));
        assert!(!in_container(cgroup, "abc12"));
        assert!(!in_container(cgroup, "pod0f1e"));
        assert!(!in_container("0::/\n", ""));
    }

    #[test]
    fn argv0_is_the_program_name() {
        for (cmdline, want) in [
            (
                &b"/usr/local/bin/cloud-controller-manager\0--v=2\0"[..],
                Some("cloud-controller-manager"),
            ),
            (
                b"cloud-controller-manager",
                Some("cloud-controller-manager"),
            ),
            (b"", None),
            (b"/\0", None),
        ] {
            assert_eq!(argv0_name(cmdline), want, "{cmdline:?}");
        }
    }

    const RESTRICTED: Expected = Expected {
        user: User::Exactly(65532),
        read_only_root: true,
        no_new_privs: true,
        no_capabilities: true,
    };

    #[test]
    fn a_restricted_process_has_no_problems() {
        let mut view = parse_status(7, STATUS).unwrap();
        view.read_only_root = true;
        assert_eq!(view.uids, [65532; 4]);
        assert_eq!(view.problems(&RESTRICTED), Vec::<String>::new());
    }

    #[test]
    fn each_loosened_setting_is_named() {
        let status = STATUS
            .replace("Uid:\t65532\t65532", "Uid:\t0\t65532")
            .replace("CapEff:\t0000000000000000", "CapEff:\t00000000a80425fb")
            .replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        let view = parse_status(7, &status).unwrap();
        let problems = view.problems(&RESTRICTED);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("[0, 65532, 65532, 65532]"));
        assert!(problems[1].contains("0xa80425fb"));
        assert!(problems[3].contains("writable"));
        let non_root = Expected {
            user: User::NonRoot,
            ..RESTRICTED
        };
        assert_eq!(view.problems(&non_root).len(), 4);
        let loose = Expected {
            user: User::Any,
            read_only_root: false,
            no_new_privs: false,
            no_capabilities: false,
        };
        assert_eq!(view.problems(&loose), Vec::<String>::new());
    }

    #[test]
    fn the_container_context_wins_over_the_pod_context() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
            "containers": [
                {"name": "a", "securityContext": {"runAsUser": 65532, "readOnlyRootFilesystem": true,
                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}},
                {"name": "b"},
                {"name": "c", "securityContext": {"privileged": true, "capabilities": {"drop": ["ALL"]}}},
            ]}}))
        .unwrap();
        assert_eq!(Expected::of(&pod, "a").unwrap(), RESTRICTED);
        let b = Expected::of(&pod, "b").unwrap();
        assert_eq!(b.user, User::Exactly(1000));
        assert!(!b.read_only_root && !b.no_new_privs && !b.no_capabilities);
        assert!(!Expected::of(&pod, "c").unwrap().no_capabilities);
        let err = Expected::of(&pod, "d").unwrap_err();
        assert!(format!("{err:#}").contains("no container d"), "{err:#}");
    }

    #[test]
    fn a_status_without_a_field_names_it() {
        let err = parse_status(7, "Uid:\t0 0 0 0\n").unwrap_err();
        assert!(format!("{err:#}").contains("no CapEff"), "{err:#}");
    }

    #[test]
    fn the_root_mount_decides() {
        let ro = "600 500 0:90 / / ro,relatime master:1 - overlay overlay rw,lowerdir=a\n601 600 0:91 / /proc rw,nosuid - proc proc rw\n";
        let rw = ro.replace("/ / ro,relatime", "/ / rw,relatime");
        assert_eq!(root_read_only(ro), Some(true));
        assert_eq!(root_read_only(&rw), Some(false));
        assert_eq!(
            root_read_only("601 600 0:91 / /proc rw - proc proc rw\n"),
            None
        );
    }
}
