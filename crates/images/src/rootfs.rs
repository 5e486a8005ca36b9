//! The file tree of an image, as a plan: the binary, the host tools it runs (a CSI driver's
//! `mkfs`, `mount`…) with the configuration they read, exactly the shared libraries `ldd` names
//! for all of them, CA certificates, a passwd and group file with the non-root user, and
//! nothing else (no shell, no package manager). Pure: reading the host's files is the layer writer's job.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The user and group images run as (distroless's `nonroot`).
pub const NONROOT_UID: u32 = 65532;
/// Where the CA bundle goes (and where rustls-native-certs and OpenSSL look first).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The mounted file systems' table, a link to the kernel's view in an image with host tools.
pub const MTAB: &str = "/etc/mtab";

/// Where a file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file on the build machine (symlinks followed).
    Host(PathBuf),
    /// Bytes written by the plan.
    Bytes(Vec<u8>),
}

/// One entry of the tree, keyed by its absolute path in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
        /// Owner (user and group).
        owner: u32,
    },
    /// A symbolic link owned by root.
    Symlink {
        /// What it points at.
        target: String,
    },
    /// A regular file owned by root.
    File {
        /// Permission bits.
        mode: u32,
        /// Its content.
        source: Source,
    },
}

/// What goes into one image: paths in the image (absolute, `/`-separated) to entries, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The entries, parents before children (a `BTreeMap` of absolute paths sorts them so).
    pub entries: BTreeMap<String, Entry>,
}

/// The inputs of an image's tree.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Where the binary goes in the image (`/usr/local/bin/<name>`).
    pub entrypoint: String,
    /// The binary on the build machine.
    pub binary: PathBuf,
    /// The host tools: path in the image, file on the build machine.
    pub tools: Vec<(String, PathBuf)>,
    /// Configuration files the tools read: path in the image, file on the build machine.
    pub tool_files: Vec<(String, PathBuf)>,
    /// The libraries `ldd` names for the binary and the tools, at the paths it names them (the
    /// same paths in the image).
    pub libraries: Vec<PathBuf>,
    /// The build machine's CA bundle.
    pub ca_bundle: PathBuf,
}

/// The image's tree.
pub fn plan(inputs: &Inputs) -> Plan {
    let mut plan = Plan::default();
    plan.file(
        &inputs.entrypoint,
        0o755,
        Source::Host(inputs.binary.clone()),
    );
    // Tools lose any setuid bit: they run as the container's user or not at all.
    for (path, host) in &inputs.tools {
        plan.file(path, 0o755, Source::Host(host.clone()));
    }
    for (path, host) in &inputs.tool_files {
        plan.file(path, 0o644, Source::Host(host.clone()));
    }
    if !inputs.tools.is_empty() {
        // mount, resize2fs and e2fsck look for mounted file systems in /etc/mtab.
        plan.parents(MTAB);
        plan.entries.insert(
            MTAB.to_owned(),
            Entry::Symlink {
                target: "/proc/self/mounts".to_owned(),
            },
        );
    }
    for lib in &inputs.libraries {
        plan.file(&lib.to_string_lossy(), 0o755, Source::Host(lib.clone()));
    }
    plan.file(CA_BUNDLE, 0o644, Source::Host(inputs.ca_bundle.clone()));
    plan.file("/etc/passwd", 0o644, Source::Bytes(passwd().into_bytes()));
    plan.file("/etc/group", 0o644, Source::Bytes(group().into_bytes()));
    plan.dir("/tmp", 0o1777, 0);
    plan.dir("/home/nonroot", 0o700, NONROOT_UID);
    plan
}

/// root and nonroot; neither has a shell to log in with.
fn passwd() -> String {
    format!(
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT_UID}:{NONROOT_UID}:nonroot:/home/nonroot:/sbin/nologin\n"
    )
}

fn group() -> String {
    format!("root:x:0:\nnonroot:x:{NONROOT_UID}:\n")
}

impl Plan {
    /// Adds a file and any missing parent directories (root-owned, 0755).
    fn file(&mut self, path: &str, mode: u32, source: Source) {
        self.parents(path);
        self.entries
            .insert(path.to_owned(), Entry::File { mode, source });
    }

    /// Adds a directory (replacing a parent added earlier with default mode) and its parents.
    fn dir(&mut self, path: &str, mode: u32, owner: u32) {
        self.parents(path);
        self.entries
            .insert(path.to_owned(), Entry::Dir { mode, owner });
    }

    fn parents(&mut self, path: &str) {
        let mut at = 0;
        while let Some(i) = path[at + 1..].find('/') {
            let parent = &path[..at + 1 + i];
            self.entries.entry(parent.to_owned()).or_insert(Entry::Dir {
                mode: 0o755,
                owner: 0,
            });
            at += 1 + i;
        }
    }

    /// The regular files' paths.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|(p, e)| match e {
            Entry::File { .. } => Some(p.as_str()),
            Entry::Dir { .. } | Entry::Symlink { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_holds_binary_libraries_certs_users_and_nothing_else() {
        let p = plan(&Inputs {
            entrypoint: "/usr/local/bin/ccm".into(),
            binary: "/build/ccm".into(),
            tools: vec![],
            tool_files: vec![],
            libraries: vec![
                "/lib/x86_64-linux-gnu/libc.so.6".into(),
                "/lib64/ld-linux-x86-64.so.2".into(),
            ],
            ca_bundle: "/etc/ssl/certs/ca-certificates.crt".into(),
        });
        let files: Vec<_> = p.files().collect();
        assert_eq!(
            files,
            [
                "/etc/group",
                "/etc/passwd",
                "/etc/ssl/certs/ca-certificates.crt",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
                "/usr/local/bin/ccm",
            ]
        );
        for dir in [
            "/etc",
            "/etc/ssl",
            "/lib",
            "/lib64",
            "/usr",
            "/usr/local/bin",
        ] {
            assert!(
                matches!(
                    p.entries[dir],
                    Entry::Dir {
                        mode: 0o755,
                        owner: 0
                    }
                ),
                "{dir}"
            );
        }
        assert!(matches!(
            p.entries["/home/nonroot"],
            Entry::Dir {
                owner: NONROOT_UID,
                ..
            }
        ));
        assert!(passwd().contains(":65532:65532:"));
    }

    #[test]
    fn tools_and_their_files_join_the_tree_without_setuid() {
        let p = plan(&Inputs {
            entrypoint: "/usr/local/bin/csi".into(),
            binary: "/build/csi".into(),
            tools: vec![
                ("/usr/bin/mount".into(), "/usr/bin/mount".into()),
                ("/usr/sbin/mkfs.ext4".into(), "/sbin/mkfs.ext4".into()),
            ],
            tool_files: vec![("/etc/mke2fs.conf".into(), "/etc/mke2fs.conf".into())],
            libraries: vec!["/lib/x86_64-linux-gnu/libmount.so.1".into()],
            ca_bundle: "/etc/ssl/certs/ca-certificates.crt".into(),
        });
        assert_eq!(
            p.entries["/usr/bin/mount"],
            Entry::File {
                mode: 0o755,
                source: Source::Host("/usr/bin/mount".into())
            }
        );
        assert_eq!(
            p.entries["/usr/sbin/mkfs.ext4"],
            Entry::File {
                mode: 0o755,
                source: Source::Host("/sbin/mkfs.ext4".into())
            }
        );
        assert!(matches!(
            p.entries["/etc/mke2fs.conf"],
            Entry::File { mode: 0o644, .. }
        ));
        assert!(p
            .files()
            .any(|f| f == "/lib/x86_64-linux-gnu/libmount.so.1"));
        assert_eq!(
            p.entries[MTAB],
            Entry::Symlink {
                target: "/proc/self/mounts".into()
            }
        );
    }
}
