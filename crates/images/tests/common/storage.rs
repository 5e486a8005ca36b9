//! The storage tools inside a CSI driver's image, run as the image runs them (by name through the
//! image's `PATH`, chrooted, as the non-root user): ext4 and xfs made on files, probed, checked,
//! grown and sized; the device tools answer their version.

use std::path::Path;

use super::run_in;

const MIB: u64 = 1 << 20;

/// Runs `program args` in `root` and returns its stdout; panics with its output when it fails.
fn ok(root: &Path, image: &str, program: &str, args: &[&str]) -> String {
    let out = run_in(root, program, args).unwrap();
    assert!(
        out.status.success(),
        "{image}: {program} {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A sparse file of `bytes` in the image's `/tmp`, owned by the non-root user.
fn disk(root: &Path, name: &str, bytes: u64) -> String {
    let host = root.join("tmp").join(name);
    let file = std::fs::File::create(&host).unwrap();
    file.set_len(bytes).unwrap();
    std::os::unix::fs::chown(
        &host,
        Some(stratus_images::rootfs::NONROOT_UID),
        Some(stratus_images::rootfs::NONROOT_UID),
    )
    .unwrap();
    format!("/tmp/{name}")
}

/// The file system blkid finds on `disk` (probing the device, no cache).
fn probe(root: &Path, image: &str, disk: &str) -> String {
    let args = ["-p", "-s", "TYPE", "-o", "value", disk];
    ok(root, image, "blkid", &args).trim().to_owned()
}

fn ext_block_count(root: &Path, image: &str, disk: &str) -> u64 {
    let header = ok(root, image, "dumpe2fs", &["-h", disk]);
    header
        .lines()
        .find_map(|l| l.strip_prefix("Block count:"))
        .unwrap_or_else(|| panic!("{image}: dumpe2fs -h shows no block count: {header}"))
        .trim()
        .parse()
        .unwrap()
}

/// The kernel's `/proc` mounted in the image's root (as a container runtime does), unmounted on
/// drop: `/etc/mtab` points into it and the ext tools refuse to work without it.
struct Proc(std::path::PathBuf);

impl Proc {
    fn mount(root: &Path) -> Proc {
        let at = root.join("proc");
        std::fs::create_dir_all(&at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "proc", "proc"])
            .arg(&at)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount proc: {out:?}");
        Proc(at)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Every storage tool of the image works from inside it.
pub fn tools_work(root: &Path, image: &str) {
    let _proc = Proc::mount(root);
    let ext = disk(root, "ext.img", 64 * MIB);
    ok(root, image, "mkfs.ext4", &["-F", "-q", "-m0", &ext]);
    let fs_type = probe(root, image, &ext);
    assert_eq!(fs_type, "ext4", "{image}: blkid");
    let before = ext_block_count(root, image, &ext);
    std::fs::File::options()
        .write(true)
        .open(root.join(ext.trim_start_matches('/')))
        .unwrap()
        .set_len(128 * MIB)
        .unwrap();
    ok(root, image, "e2fsck", &["-f", "-p", &ext]);
    ok(root, image, "resize2fs", &[&ext]);
    let after = ext_block_count(root, image, &ext);
    assert!(after > before, "{image}: resize2fs grew {before} → {after}");

    let ext3 = disk(root, "ext3.img", 32 * MIB);
    ok(root, image, "mkfs.ext3", &["-F", "-q", &ext3]);
    let fs_type = probe(root, image, &ext3);
    assert_eq!(fs_type, "ext3", "{image}: mkfs.ext3 made {fs_type}");

    let xfs = disk(root, "xfs.img", 320 * MIB);
    ok(root, image, "mkfs.xfs", &["-f", "-q", "-K", &xfs]);
    let fs_type = probe(root, image, &xfs);
    assert_eq!(fs_type, "xfs", "{image}: blkid");
    let sb = ok(
        root,
        image,
        "xfs_db",
        &["-r", "-c", "sb 0", "-c", "print dblocks blocksize", &xfs],
    );
    assert!(sb.contains("dblocks = "), "{image}: xfs_db: {sb}");

    // Mounting, loop devices and growing a mounted xfs need root and devices: the real node's
    // suites do those; here each must at least run from the image.
    for program in ["mount", "umount", "losetup", "blockdev", "xfs_growfs"] {
        ok(root, image, program, &["-V"]);
    }
}
