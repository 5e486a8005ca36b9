//! Finding a binary's host tools on the build machine: each program's file, where it goes in
//! the image (the same directory, under its own name — `mkfs.ext4` is `mke2fs` choosing ext4 by
//! the name it runs under) and the configuration files the tools read.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::table::HostTool;

/// The directories searched, in order; also the image's `PATH` after `/usr/local/bin`.
pub const DIRS: &[&str] = &["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// One tool found: its path in the image and the file on the build machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Where it goes in the image (`/usr/sbin/mkfs.ext4`).
    pub image_path: String,
    /// The file on the build machine (symlinks are followed when it is read).
    pub host_path: PathBuf,
}

/// Finds every tool under `root` (`/` on a build machine); a missing one is an error naming it
/// and the Debian package that ships it.
pub fn find(tools: &[HostTool], root: &Path) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for tool in tools {
        match locate(tool.name, root) {
            Some(f) => found.push(f),
            None => missing.push(format!("{} (Debian package {})", tool.name, tool.package)),
        }
    }
    if !missing.is_empty() {
        bail!(
            "the build machine lacks {} (searched {})",
            missing.join(", "),
            DIRS.join(", ")
        );
    }
    Ok(found)
}

/// The configuration files the tools read that exist under `root`, each once.
pub fn present_files(tools: &[HostTool], root: &Path) -> Vec<(String, PathBuf)> {
    let mut files: Vec<_> = tools
        .iter()
        .flat_map(|t| t.files.iter())
        .map(|c| ((*c).to_owned(), root.join(c.trim_start_matches('/'))))
        .filter(|(_, host)| host.is_file())
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The first directory holding `name`. `/sbin` and `/bin` are links to `/usr/…` on a merged
/// system; the image keeps the `/usr` path so one `PATH` serves both.
fn locate(name: &str, root: &Path) -> Option<Found> {
    DIRS.iter().find_map(|dir| {
        let host_path = root.join(dir.trim_start_matches('/')).join(name);
        host_path.is_file().then(|| {
            let image_dir = match *dir {
                "/sbin" => "/usr/sbin",
                "/bin" => "/usr/bin",
                other => other,
            };
            Found {
                image_path: format!("{image_dir}/{name}"),
                host_path,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::HostTool;

    fn tool(name: &'static str) -> HostTool {
        HostTool {
            name,
            package: "pkg-of-it",
            files: &[],
        }
    }

    #[test]
    fn finds_tools_in_order_keeps_names_and_names_what_is_missing() {
        let root = tempfile::tempdir().unwrap();
        for (dir, name) in [
            ("usr/sbin", "mke2fs"),
            ("sbin", "legacy"),
            ("usr/bin", "mount"),
            ("usr/sbin", "mount"),
        ] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
            std::fs::write(root.path().join(dir).join(name), b"x").unwrap();
        }
        std::os::unix::fs::symlink("mke2fs", root.path().join("usr/sbin/mkfs.ext4")).unwrap();
        let found = find(
            &[tool("mkfs.ext4"), tool("mount"), tool("legacy")],
            root.path(),
        )
        .unwrap();
        let paths: Vec<_> = found.iter().map(|f| f.image_path.as_str()).collect();
        assert_eq!(
            paths,
            ["/usr/sbin/mkfs.ext4", "/usr/sbin/mount", "/usr/sbin/legacy"]
        );
        assert_eq!(
            found[0].host_path,
            root.path().join("usr/sbin/mkfs.ext4"),
            "the link's own name, so mke2fs sees mkfs.ext4"
        );

        let err = find(&[tool("mount"), tool("xfs_growfs")], root.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("xfs_growfs (Debian package pkg-of-it)") && !err.contains("mount"),
            "{err}"
        );

        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/mke2fs.conf"), b"[defaults]").unwrap();
        let conf = HostTool {
            files: &["/etc/mke2fs.conf", "/etc/absent.conf"],
            ..tool("mkfs.ext4")
        };
        assert_eq!(
            present_files(&[conf, conf, tool("mount")], root.path()),
            [(
                "/etc/mke2fs.conf".to_owned(),
                root.path().join("etc/mke2fs.conf")
            )]
        );
    }
}
