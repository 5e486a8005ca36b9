//! The mount/format seam: one trait for everything the node plugin does to devices and mount
//! points, and [`SystemMounter`], which runs the real commands (`blkid`, `mkfs.*`, `mount`,
//! `umount`, `resize2fs`, `xfs_growfs`, `blockdev`) and reads `/proc/self/mountinfo`. Tests use
//! it as is on loop devices.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::process::Command;

use crate::error::BackendError;
use crate::format::FormatOptions;

/// Space and inode use of a mounted file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Total bytes.
    pub total_bytes: i64,
    /// Bytes available to unprivileged users.
    pub available_bytes: i64,
    /// Bytes used.
    pub used_bytes: i64,
    /// Total inodes.
    pub total_inodes: i64,
    /// Free inodes.
    pub free_inodes: i64,
    /// Used inodes.
    pub used_inodes: i64,
}

/// One line of `/proc/self/mountinfo` we care about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount point.
    pub target: PathBuf,
    /// The mount source (device).
    pub source: String,
    /// The root of the mount within its file system (`/` unless a bind of a subdirectory).
    pub root: String,
    /// The file system type.
    pub fs_type: String,
    /// The device number `major:minor`.
    pub dev: String,
}

/// What the node plugin does to devices and mount points.
#[async_trait]
pub trait Mounter: Send + Sync + 'static {
    /// The file system on the device, `None` when it is empty.
    async fn fs_type(&self, device: &Path) -> Result<Option<String>, BackendError>;
    /// Formats the device with `fs_type`.
    async fn format(
        &self,
        device: &Path,
        fs_type: &str,
        options: &FormatOptions,
    ) -> Result<(), BackendError>;
    /// Mounts `source` at `target` with a file-system type (None for a bind) and options.
    async fn mount(
        &self,
        source: &Path,
        target: &Path,
        fs_type: Option<&str>,
        options: &[String],
    ) -> Result<(), BackendError>;
    /// Unmounts `target`.
    async fn unmount(&self, target: &Path) -> Result<(), BackendError>;
    /// The mount at exactly `target`, if any.
    async fn mount_at(&self, target: &Path) -> Result<Option<MountEntry>, BackendError>;
    /// Grows the file system on `device` mounted at `mount_point` to fill the device.
    async fn resize_fs(&self, device: &Path, mount_point: &Path) -> Result<(), BackendError>;
    /// Size of a block device in bytes.
    async fn device_size(&self, device: &Path) -> Result<i64, BackendError>;
    /// Size in bytes of the `fs_type` file system on a device (ext2/3/4 from the superblock
    /// with `dumpe2fs -h`, xfs with `xfs_db -r`; mounted or not), `None` when this mounter
    /// cannot tell for that type.
    async fn fs_size(&self, device: &Path, fs_type: &str) -> Result<Option<i64>, BackendError>;
    /// Grows the file system on an unmounted device to fill it (ext2/3/4: `e2fsck -f -p`, then
    /// `resize2fs`). No mount is needed, so it works where the kernel refuses online resizes.
    async fn grow_offline(&self, device: &Path, fs_type: &str) -> Result<(), BackendError>;
    /// Space and inodes of the file system mounted at `path`.
    fn stats(&self, path: &Path) -> Result<FsStats, BackendError>;
}

/// Runs the real commands.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMounter {
    legacy_xfs: bool,
}

impl SystemMounter {
    /// Formats XFS without `bigtime`, `inobtcount` and `reflink` (the EBS node's
    /// `--legacy-xfs`: mountable by Linux 5.4 and older).
    pub fn with_legacy_xfs(self, legacy_xfs: bool) -> SystemMounter {
        SystemMounter { legacy_xfs }
    }
}

async fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<String, BackendError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| BackendError::Internal(format!("running {program}: {e}")))?;
    if !out.status.success() {
        return Err(BackendError::Internal(format!(
            "{program} {} failed ({}): {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `mkfs` program and arguments for a file system (force, no reserved blocks on ext, no
/// discard so a large cloud volume formats quickly) with `options` added; an option the file
/// system cannot take is InvalidArgument.
pub fn mkfs_command(
    fs_type: &str,
    options: &FormatOptions,
) -> Result<(String, Vec<String>), BackendError> {
    let base: &[&str] = match fs_type {
        "ext4" | "ext3" => &["-F", "-m0", "-E", "nodiscard"],
        "xfs" => &["-f", "-K"],
        other => {
            return Err(BackendError::InvalidArgument(format!(
                "cannot format {other:?}: ext4, ext3 or xfs"
            )))
        }
    };
    let mut args: Vec<String> = base.iter().map(|a| a.to_string()).collect();
    args.extend(
        options
            .mkfs_args(fs_type)
            .map_err(BackendError::InvalidArgument)?,
    );
    Ok((format!("mkfs.{fs_type}"), args))
}

/// The slack below which a device is not worth growing into (upstream's resize threshold).
pub const GROW_THRESHOLD_BYTES: i64 = 1 << 20;

/// Whether a file system of `fs_bytes` on a device of `device_bytes` should be grown.
pub fn needs_grow(fs_bytes: i64, device_bytes: i64) -> bool {
    device_bytes - fs_bytes > GROW_THRESHOLD_BYTES
}

/// The file-system size in bytes from `dumpe2fs -h` output (block count × block size).
pub fn parse_dumpe2fs(text: &str) -> Option<i64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    Some(field("Block count:")? * field("Block size:")?)
}

/// The file-system size in bytes from `xfs_db -c 'print dblocks blocksize'` output.
pub fn parse_xfs_db(text: &str) -> Option<i64> {
    let field = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == name)
            .and_then(|(_, v)| v.trim().parse::<i64>().ok())
    };
    Some(field("dblocks")? * field("blocksize")?)
}

/// Parses `/proc/self/mountinfo` (octal escapes in paths decoded).
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            Some(MountEntry {
                dev: fields.get(2)?.to_string(),
                root: unescape(fields.get(3)?),
                target: PathBuf::from(unescape(fields.get(4)?)),
                fs_type: fields.get(sep + 1)?.to_string(),
                source: unescape(fields.get(sep + 2)?),
            })
        })
        .collect()
}

fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[async_trait]
impl Mounter for SystemMounter {
    async fn fs_type(&self, device: &Path) -> Result<Option<String>, BackendError> {
        // blkid exits 2 when it finds no signature: an empty device.
        let out = Command::new("blkid")
            .args(["-p", "-s", "TYPE", "-o", "value"])
            .arg(device)
            .output()
            .await
            .map_err(|e| BackendError::Internal(format!("running blkid: {e}")))?;
        match out.status.code() {
            Some(0) => {
                let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
                Ok((!t.is_empty()).then_some(t))
            }
            Some(2) => Ok(None),
            _ => Err(BackendError::Internal(format!(
                "blkid {} failed: {}",
                device.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }

    async fn format(
        &self,
        device: &Path,
        fs_type: &str,
        options: &FormatOptions,
    ) -> Result<(), BackendError> {
        let options = FormatOptions {
            legacy_xfs: options.legacy_xfs || self.legacy_xfs,
            ..options.clone()
        };
        let (program, args) = mkfs_command(fs_type, &options)?;
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        all.push(device.as_os_str());
        run(&program, &all).await.map(|_| ())
    }

    async fn mount(
        &self,
        source: &Path,
        target: &Path,
        fs_type: Option<&str>,
        options: &[String],
    ) -> Result<(), BackendError> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        match fs_type {
            Some(t) => args.extend(["-t".into(), t.into()]),
            None => args.push("--bind".into()),
        }
        if !options.is_empty() {
            args.extend(["-o".into(), options.join(",").into()]);
        }
        args.push(source.into());
        args.push(target.into());
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        run("mount", &refs).await?;
        // A read-only bind needs a remount: `mount --bind -o ro` ignores `ro` on old kernels.
        if fs_type.is_none() && options.iter().any(|o| o == "ro") {
            run(
                "mount",
                &[
                    "-o".as_ref(),
                    "remount,bind,ro".as_ref(),
                    target.as_os_str(),
                ],
            )
            .await?;
        }
        Ok(())
    }

    async fn unmount(&self, target: &Path) -> Result<(), BackendError> {
        run("umount", &[target.as_os_str()]).await.map(|_| ())
    }

    async fn mount_at(&self, target: &Path) -> Result<Option<MountEntry>, BackendError> {
        let text = tokio::fs::read_to_string("/proc/self/mountinfo")
            .await
            .map_err(|e| BackendError::Internal(format!("reading mountinfo: {e}")))?;
        // The last entry wins: a later mount over the same point hides the earlier one.
        Ok(parse_mountinfo(&text)
            .into_iter()
            .rev()
            .find(|m| m.target == target))
    }

    async fn resize_fs(&self, device: &Path, mount_point: &Path) -> Result<(), BackendError> {
        match self.fs_type(device).await?.as_deref() {
            Some("xfs") => run("xfs_growfs", &[mount_point.as_os_str()])
                .await
                .map(|_| ()),
            Some("ext4" | "ext3" | "ext2") => {
                run("resize2fs", &[device.as_os_str()]).await.map(|_| ())
            }
            Some(other) => Err(BackendError::InvalidArgument(format!(
                "cannot grow a {other} file system"
            ))),
            None => Err(BackendError::FailedPrecondition(format!(
                "{} has no file system",
                device.display()
            ))),
        }
    }

    async fn device_size(&self, device: &Path) -> Result<i64, BackendError> {
        let out = run("blockdev", &["--getsize64".as_ref(), device.as_os_str()]).await?;
        out.trim()
            .parse()
            .map_err(|e| BackendError::Internal(format!("blockdev answered {out:?}: {e}")))
    }

    async fn fs_size(&self, device: &Path, fs_type: &str) -> Result<Option<i64>, BackendError> {
        if fs_type == "xfs" {
            let out = run(
                "xfs_db",
                &[
                    "-r".as_ref(),
                    "-c".as_ref(),
                    "sb 0".as_ref(),
                    "-c".as_ref(),
                    "print dblocks blocksize".as_ref(),
                    device.as_os_str(),
                ],
            )
            .await?;
            return parse_xfs_db(&out).map(Some).ok_or_else(|| {
                BackendError::Internal(format!(
                    "xfs_db on {} shows no dblocks and blocksize: {out:?}",
                    device.display()
                ))
            });
        }
        if !matches!(fs_type, "ext4" | "ext3" | "ext2") {
            return Ok(None);
        }
        let out = run("dumpe2fs", &["-h".as_ref(), device.as_os_str()]).await?;
        parse_dumpe2fs(&out).map(Some).ok_or_else(|| {
            BackendError::Internal(format!(
                "dumpe2fs -h {} shows no block count and size",
                device.display()
            ))
        })
    }

    async fn grow_offline(&self, device: &Path, fs_type: &str) -> Result<(), BackendError> {
        if !matches!(fs_type, "ext4" | "ext3" | "ext2") {
            return Err(BackendError::InvalidArgument(format!(
                "cannot grow an unmounted {fs_type} file system"
            )));
        }
        // resize2fs insists on a freshly checked file system; -p repairs only what is safe and
        // exits 1 when it fixed something (still fine to resize).
        let check = Command::new("e2fsck")
            .args(["-f", "-p"])
            .arg(device)
            .output()
            .await
            .map_err(|e| BackendError::Internal(format!("running e2fsck: {e}")))?;
        if !matches!(check.status.code(), Some(0 | 1)) {
            return Err(BackendError::Internal(format!(
                "e2fsck -f -p {} failed ({}): {}",
                device.display(),
                check.status,
                String::from_utf8_lossy(&check.stdout).trim()
            )));
        }
        run("resize2fs", &[device.as_os_str()]).await.map(|_| ())
    }

    fn stats(&self, path: &Path) -> Result<FsStats, BackendError> {
        let s = rustix::fs::statvfs(path).map_err(|e| match e {
            rustix::io::Errno::NOENT => {
                BackendError::NotFound(format!("{} does not exist", path.display()))
            }
            e => BackendError::Internal(format!("statvfs {}: {e}", path.display())),
        })?;
        let frsize = s.f_frsize as i64;
        Ok(FsStats {
            total_bytes: s.f_blocks as i64 * frsize,
            available_bytes: s.f_bavail as i64 * frsize,
            used_bytes: (s.f_blocks as i64 - s.f_bfree as i64) * frsize,
            total_inodes: s.f_files as i64,
            free_inodes: s.f_ffree as i64,
            used_inodes: s.f_files as i64 - s.f_ffree as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let text = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                    37 35 7:1 / /var/lib/kubelet/staging rw - ext4 /dev/loop1 rw\n";
        let entries = parse_mountinfo(text);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].target, PathBuf::from("/mnt/with space"));
        assert_eq!(entries[0].root, "/mnt1");
        assert_eq!(entries[1].fs_type, "ext4");
        assert_eq!(entries[1].source, "/dev/loop1");
        assert_eq!(entries[1].dev, "7:1");
    }

    #[test]
    fn grow_decisions() {
        let gib = 1i64 << 30;
        for (fs, dev, want) in [
            (gib, gib, false),
            (gib, gib + GROW_THRESHOLD_BYTES, false),
            (gib, gib + GROW_THRESHOLD_BYTES + 1, true),
            (gib, 2 * gib, true),
            (2 * gib, gib, false),
        ] {
            assert_eq!(needs_grow(fs, dev), want, "fs {fs} on device {dev}");
        }
    }

    #[test]
    fn dumpe2fs_sizes() {
        let text = "Filesystem volume name:   <none>\nBlock count:              262144\n\
                    Reserved block count:     0\nBlock size:               4096\n";
        assert_eq!(parse_dumpe2fs(text), Some(1 << 30));
        assert_eq!(parse_dumpe2fs("Block size: 4096\n"), None);
    }

    #[test]
    fn xfs_db_sizes() {
        assert_eq!(
            parse_xfs_db("dblocks = 262144\nblocksize = 4096\n"),
            Some(1 << 30)
        );
        assert_eq!(parse_xfs_db("blocksize = 4096\n"), None);
    }

    #[test]
    fn mkfs_table() {
        let none = FormatOptions::default();
        assert_eq!(mkfs_command("ext4", &none).unwrap().0, "mkfs.ext4");
        assert_eq!(mkfs_command("xfs", &none).unwrap().0, "mkfs.xfs");
        assert!(mkfs_command("ntfs", &none).is_err());
        let small_blocks = FormatOptions {
            block_size: Some(2048),
            ..FormatOptions::default()
        };
        assert_eq!(
            mkfs_command("ext4", &small_blocks).unwrap().1,
            ["-F", "-m0", "-E", "nodiscard", "-b", "2048"]
        );
    }
}
