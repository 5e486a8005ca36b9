//! The loop devices of a cluster: those whose backing file is a file of the cluster's directory.
//! A CSI node plugin attaches its test volumes through its bind mount of the kubelet's root, and
//! the kernel then names the backing file relative to that mount (`/stratus-ebs-loops/….img`),
//! not under the directory; so a device is matched by its backing file's device and inode
//! (losetup's `BACK-MAJ:MIN` and `BACK-INO`) as well as by its path.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;

/// A file's identity: `(major, minor)` of its file system's device and its inode.
type FileId = ((u64, u64), u64);

/// An attached loop device as `losetup --list --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopDevice {
    /// `/dev/loopN`.
    pub(crate) name: String,
    /// The backing file's path as the kernel names it.
    pub(crate) file: String,
    /// The backing file's identity, when losetup gave it.
    pub(crate) id: Option<FileId>,
}

/// Detaches every loop device backed by a file of `dir`.
pub(crate) fn detach_under(dir: &Path) {
    let files = file_ids(dir);
    for device in attached() {
        if belongs(&device, dir, &files) {
            let _ = Command::new("losetup").args(["-d", &device.name]).status();
        }
    }
}

/// Whether `device`'s backing file is a file of `dir` (by path, or by identity in `files`).
pub(crate) fn belongs(device: &LoopDevice, dir: &Path, files: &HashSet<FileId>) -> bool {
    device.file.starts_with(&dir.display().to_string())
        || device.id.is_some_and(|id| files.contains(&id))
}

/// The attached loop devices (none when losetup cannot tell).
fn attached() -> Vec<LoopDevice> {
    Command::new("losetup")
        .args([
            "--list",
            "--json",
            "-O",
            "NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN",
        ])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| parse_list(&String::from_utf8_lossy(&out.stdout)))
        .unwrap_or_default()
}

/// `losetup --list --json` (empty output when no device is attached).
pub(crate) fn parse_list(json: &str) -> Vec<LoopDevice> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    value["loopdevices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let name = d["name"].as_str()?.to_owned();
            let file = d["back-file"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_owned();
            let ino = d["back-ino"]
                .as_u64()
                .or_else(|| d["back-ino"].as_str()?.trim().parse().ok());
            let dev = d["back-maj:min"].as_str().and_then(|s| {
                let (major, minor) = s.trim().split_once(':')?;
                Some((major.parse().ok()?, minor.parse().ok()?))
            });
            Some(LoopDevice {
                name,
                file,
                id: dev.zip(ino),
            })
        })
        .collect()
}

/// The identities of the regular files under `dir` (symbolic links not followed).
fn file_ids(dir: &Path) -> HashSet<FileId> {
    let mut ids = HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() {
            ids.insert(((major(meta.dev()), minor(meta.dev())), meta.ino()));
        }
    }
    ids
}

/// Linux's `major(3)` of a `dev_t`.
fn major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

/// Linux's `minor(3)` of a `dev_t`.
fn minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"{"loopdevices": [
        {"name": "/dev/loop3", "back-file": "/stratus-ebs-loops/vol-1.img", "back-ino": 977, "back-maj:min": "     254:0  "},
        {"name": "/dev/loop4", "back-file": "/tmp/stratus-real-1/x.img (deleted)", "back-ino": "12", "back-maj:min": "254:1"},
        {"name": "/dev/loop5", "back-file": "/elsewhere/y.img", "back-ino": 978, "back-maj:min": "254:0"}
    ]}"#;

    #[test]
    fn devices_are_the_clusters_by_path_or_by_file_identity() {
        let devices = parse_list(LIST);
        assert_eq!(devices.len(), 3);
        assert_eq!(devices[0].id, Some(((254, 0), 977)));
        assert_eq!(devices[1].id, Some(((254, 1), 12)));
        let dir = Path::new("/tmp/stratus-real-1");
        let files = HashSet::from([((254, 0), 977)]);
        let ours: Vec<&str> = devices
            .iter()
            .filter(|d| belongs(d, dir, &files))
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(ours, ["/dev/loop3", "/dev/loop4"]);
        assert!(parse_list("").is_empty());
    }

    #[test]
    fn device_numbers_split_like_the_kernels() {
        assert_eq!((major(65024), minor(65024)), (254, 0));
        let big = (0x123 << 8) | 0x45 | (0x67 << 12) << 8;
        assert_eq!(minor(big), 0x45 | (0x67 << 8));
        assert_eq!(major(big), 0x123);
    }
}
