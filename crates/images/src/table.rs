//! The binaries Stratus ships and what each becomes: one line per binary.

/// What a binary is released as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A server run as a pod: an OCI image with the binary as its entrypoint.
    Image,
    /// A kubelet plugin installed on the node: a plain `.tar.gz` holding the binary.
    NodeTarball,
}

/// One shipped binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binary {
    /// The cargo binary name (also the image's name and the entrypoint's file name).
    pub name: &'static str,
    /// The cargo package that builds it.
    pub package: &'static str,
    /// What it is released as.
    pub kind: Kind,
    /// The cargo profile its release build uses ([`RELEASE`] or [`RELEASE_MIN`]).
    pub profile: &'static str,
    /// The host programs it runs (placed in its image with their libraries).
    pub tools: &'static [HostTool],
}

/// A program a binary runs (`mkfs.ext4`, `mount`…), taken from the build machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTool {
    /// The program's name, as the binary runs it through `PATH`.
    pub name: &'static str,
    /// The Debian package that ships it (named when the build machine lacks it).
    pub package: &'static str,
    /// Configuration files it reads when they exist (copied when the build machine has them).
    pub files: &'static [&'static str],
}

/// What a CSI node plugin runs to stage, expand and inspect volumes (`crates/csi`'s mounter and
/// loop devices): format, probe, mount, check, grow and size block devices.
pub const STORAGE_TOOLS: &[HostTool] = &[
    HostTool {
        files: MKE2FS_CONF,
        ..tool("mkfs.ext4", "e2fsprogs")
    },
    HostTool {
        files: MKE2FS_CONF,
        ..tool("mkfs.ext3", "e2fsprogs")
    },
    tool("e2fsck", "e2fsprogs"),
    tool("resize2fs", "e2fsprogs"),
    tool("dumpe2fs", "e2fsprogs"),
    tool("mkfs.xfs", "xfsprogs"),
    tool("xfs_growfs", "xfsprogs"),
    tool("xfs_db", "xfsprogs"),
    tool("blkid", "util-linux"),
    tool("blockdev", "util-linux"),
    tool("losetup", "mount"),
    tool("mount", "mount"),
    tool("umount", "mount"),
];

/// mke2fs's file-system defaults (it has built-in ones when the file is absent).
const MKE2FS_CONF: &[&str] = &["/etc/mke2fs.conf"];

const fn tool(name: &'static str, package: &'static str) -> HostTool {
    HostTool {
        name,
        package,
        files: &[],
    }
}

/// The profile of most release binaries: optimised for size, thin LTO.
pub const RELEASE: &str = "release";
/// The profile of binaries whose resident memory is dominated by their own code (the
/// discoverer): fat LTO, one codegen unit, `opt-level = "z"`, abort on panic (see Cargo.toml).
pub const RELEASE_MIN: &str = "release-min";

/// Where the images are meant to be pushed; the charts' `image.repository` defaults name it.
pub const REPOSITORY_PREFIX: &str = "ghcr.io/stratus";

/// Every shipped binary. Adding one is one line here (and its package in the workspace).
pub const BINARIES: &[Binary] = &[
    bin("cloud-controller-manager", Kind::Image),
    Binary {
        profile: RELEASE_MIN,
        ..bin("cloud-data-discoverer", Kind::Image)
    },
    bin("node-termination-handler", Kind::Image),
    csi("ebs-csi-driver"),
    csi("cinder-csi-plugin"),
    csi("dvp-csi-driver"),
    bin("capdvp-controller-manager", Kind::Image),
    bin("aws-load-balancer-controller", Kind::Image),
    bin("module-controller", Kind::Image),
    bin("csi-node-driver-registrar", Kind::Image),
    bin("csi-livenessprobe", Kind::Image),
    bin("ecr-credential-provider", Kind::NodeTarball),
];

/// A binary whose package has its name (as every Stratus binary's does).
const fn bin(name: &'static str, kind: Kind) -> Binary {
    Binary {
        name,
        package: name,
        kind,
        profile: RELEASE,
        tools: &[],
    }
}

/// A CSI driver: one image for controller and node, so it carries the storage tools.
const fn csi(name: &'static str) -> Binary {
    Binary {
        tools: STORAGE_TOOLS,
        ..bin(name, Kind::Image)
    }
}

impl Binary {
    /// The image repository, e.g. `ghcr.io/stratus/cloud-controller-manager`.
    pub fn repository(&self) -> String {
        format!("{REPOSITORY_PREFIX}/{}", self.name)
    }

    /// The binary's path inside its image.
    pub fn entrypoint(&self) -> String {
        format!("/usr/local/bin/{}", self.name)
    }
}

/// The binary called `name`, if Stratus ships one.
pub fn find(name: &str) -> Option<&'static Binary> {
    BINARIES.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for b in BINARIES {
            assert_eq!(find(b.name), Some(b));
            assert_eq!(BINARIES.iter().filter(|o| o.name == b.name).count(), 1);
        }
        assert_eq!(
            find("cloud-controller-manager").unwrap().repository(),
            "ghcr.io/stratus/cloud-controller-manager"
        );
        assert!(find("sh").is_none());
        assert!(BINARIES
            .iter()
            .all(|b| b.profile == RELEASE || b.profile == RELEASE_MIN));
        assert_eq!(find("cloud-data-discoverer").unwrap().profile, RELEASE_MIN);
        let with_tools: Vec<_> = BINARIES
            .iter()
            .filter(|b| !b.tools.is_empty())
            .map(|b| b.name)
            .collect();
        assert_eq!(
            with_tools,
            ["ebs-csi-driver", "cinder-csi-plugin", "dvp-csi-driver"]
        );
    }
}
