//! Old test executables: each build of a changed test target leaves the previous executable
//! (`<target>-<16 hex digits>`, hundreds of MB with debug info) in the target directory, and on a
//! long-lived cache they fill the disk. After a whole-workspace build, the executables of the
//! same targets under other hashes are removed; what cargo still needs (libraries, metadata) is
//! never touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The file names in `listing` (one directory's) that are older builds of the targets whose
/// current executables are `current` (file names in that directory).
pub fn stale(current: &BTreeSet<String>, listing: &[String]) -> Vec<String> {
    let targets: BTreeSet<&str> = current.iter().filter_map(|name| target_of(name)).collect();
    listing
        .iter()
        .filter(|name| !current.contains(*name))
        .filter(|name| target_of(name).is_some_and(|t| targets.contains(t)))
        .cloned()
        .collect()
}

/// `rbac` of `rbac-0123456789abcdef`; none for a name not of that shape (`librbac-….rlib`,
/// `rbac-….d`).
fn target_of(name: &str) -> Option<&str> {
    let (target, hash) = name.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(target)
}

/// Removes the older builds of `executables` in their directories; returns how many files and
/// bytes went. A file that cannot be read or removed is left.
pub fn remove_stale(executables: &[PathBuf]) -> (usize, u64) {
    let mut by_dir: std::collections::BTreeMap<&Path, BTreeSet<String>> = Default::default();
    for exe in executables {
        if let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) {
            by_dir
                .entry(dir)
                .or_default()
                .insert(name.to_string_lossy().into_owned());
        }
    }
    let (mut files, mut bytes) = (0, 0);
    for (dir, current) in by_dir {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let listing: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for name in stale(&current, &listing) {
            let path = dir.join(&name);
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(&path).is_ok() {
                files += 1;
                bytes += size;
            }
        }
    }
    (files, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_older_builds_of_current_targets_go() {
        let current: BTreeSet<String> = names(&["rbac-1111111111111111", "aws-2222222222222222"])
            .into_iter()
            .collect();
        let listing = names(&[
            "rbac-1111111111111111",
            "rbac-aaaaaaaaaaaaaaaa",
            "rbac-aaaaaaaaaaaaaaaa.d",
            "librbac-aaaaaaaaaaaaaaaa.rlib",
            "aws-2222222222222222",
            "aws-bbbbbbbbbbbbbbbb",
            "other-cccccccccccccccc",
            "aws-notahash",
            "build_script_build-dddddddddddddddd",
        ]);
        assert_eq!(
            stale(&current, &listing),
            names(&["rbac-aaaaaaaaaaaaaaaa", "aws-bbbbbbbbbbbbbbbb"])
        );
    }

    #[test]
    fn removal_keeps_the_current_one_and_counts_what_went() {
        let dir = std::env::temp_dir().join(format!("stratus-prune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, size) in [
            ("t-1111111111111111", 3),
            ("t-2222222222222222", 5),
            ("libt-2222222222222222.rlib", 7),
        ] {
            std::fs::write(dir.join(name), vec![0u8; size]).unwrap();
        }
        let (files, bytes) = remove_stale(&[dir.join("t-1111111111111111")]);
        assert_eq!((files, bytes), (1, 5));
        assert!(dir.join("t-1111111111111111").exists());
        assert!(dir.join("libt-2222222222222222.rlib").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
