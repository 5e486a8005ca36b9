//! Virtio device discovery: a Cinder volume attached by Nova shows up as a virtio disk whose
//! serial is the volume ID cut to 20 characters — read from `/sys/block/*/serial` directly (no
//! udev needed), with the udev links `/dev/disk/by-id/virtio-<serial>` (and the SCSI twin)
//! tried first. A resize is made visible with `echo 1 > /sys/block/<dev>/device/rescan` when
//! `[BlockStorage] rescan-on-resize` asks for it.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use stratus_csi::devices::DeviceFinder;
use stratus_csi::BackendError;

/// The serial a virtio disk of `volume_id` carries.
pub fn serial(volume_id: &str) -> String {
    volume_id.chars().take(20).collect()
}

/// The `/dev/disk/by-id` names udev gives the volume's disk.
pub fn by_id_names(volume_id: &str) -> Vec<String> {
    let s = serial(volume_id);
    vec![
        format!("virtio-{s}"),
        format!("scsi-0QEMU_QEMU_HARDDISK_{s}"),
        format!("wwn-0x{}", volume_id.replace('-', "")),
    ]
}

/// The block device among `(name, serial)` pairs whose serial is the volume's (pure).
pub fn match_serial(disks: &[(String, String)], volume_id: &str) -> Option<String> {
    let want = serial(volume_id);
    let mut found: Vec<&String> = disks
        .iter()
        .filter(|(_, s)| s.trim() == want)
        .map(|(n, _)| n)
        .collect();
    found.sort();
    found.first().map(|n| n.to_string())
}

/// Virtio discovery through `/dev/disk/by-id` and sysfs.
#[derive(Debug, Clone)]
pub struct VirtioDevices {
    /// `/sys` (a directory tree in tests).
    pub sys: PathBuf,
    /// `/dev`.
    pub dev: PathBuf,
    /// `[BlockStorage] rescan-on-resize`.
    pub rescan_on_resize: bool,
}

impl VirtioDevices {
    /// Discovery under the real `/sys` and `/dev`.
    pub fn new(rescan_on_resize: bool) -> VirtioDevices {
        VirtioDevices {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            rescan_on_resize,
        }
    }

    fn disks(&self) -> Vec<(String, String)> {
        let Ok(entries) = std::fs::read_dir(self.sys.join("block")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let serial = std::fs::read_to_string(e.path().join("serial")).ok()?;
                Some((name, serial))
            })
            .collect()
    }
}

#[async_trait]
impl DeviceFinder for VirtioDevices {
    async fn locate(
        &self,
        volume_id: &str,
        _hint: Option<&str>,
    ) -> Result<Option<PathBuf>, BackendError> {
        for name in by_id_names(volume_id) {
            let link = self.dev.join("disk/by-id").join(name);
            if let Ok(target) = std::fs::canonicalize(&link) {
                return Ok(Some(target));
            }
        }
        Ok(match_serial(&self.disks(), volume_id).map(|n| self.dev.join(n)))
    }

    async fn rescan(
        &self,
        _volume_id: &str,
        device: &Path,
        _required_bytes: i64,
    ) -> Result<(), BackendError> {
        if !self.rescan_on_resize {
            return Ok(());
        }
        let Some(name) = device.file_name() else {
            return Ok(());
        };
        let knob = self.sys.join("block").join(name).join("device/rescan");
        std::fs::write(&knob, "1")
            .map_err(|e| BackendError::Internal(format!("rescanning {}: {e}", knob.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_match_volume_ids() {
        let id = "0b8c4f3e-1d2a-4e5f-9a7b-123456789abc";
        assert_eq!(serial(id), "0b8c4f3e-1d2a-4e5f-9");
        let disks = vec![
            ("vda".to_string(), String::new()),
            ("vdc".to_string(), "0b8c4f3e-1d2a-4e5f-9\n".to_string()),
        ];
        assert_eq!(match_serial(&disks, id).as_deref(), Some("vdc"));
        assert_eq!(match_serial(&disks, "ffff"), None);
    }

    #[tokio::test]
    async fn sysfs_and_by_id_are_read() {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path().join("sys");
        let dev = root.path().join("dev");
        std::fs::create_dir_all(sys.join("block/vdd/device")).unwrap();
        std::fs::write(sys.join("block/vdd/serial"), "0b8c4f3e-1d2a-4e5f-9").unwrap();
        std::fs::create_dir_all(dev.join("disk/by-id")).unwrap();
        std::fs::write(dev.join("vde"), "").unwrap();
        std::os::unix::fs::symlink(
            dev.join("vde"),
            dev.join("disk/by-id/virtio-11111111-2222-3333-4"),
        )
        .unwrap();
        let finder = VirtioDevices {
            sys: sys.clone(),
            dev: dev.clone(),
            rescan_on_resize: true,
        };
        let found = finder
            .locate("0b8c4f3e-1d2a-4e5f-9a7b-123456789abc", None)
            .await
            .unwrap();
        assert_eq!(found, Some(dev.join("vdd")));
        let linked = finder
            .locate("11111111-2222-3333-4444-555555555555", None)
            .await
            .unwrap();
        assert_eq!(
            linked,
            Some(std::fs::canonicalize(dev.join("vde")).unwrap())
        );
        finder.rescan("x", &dev.join("vdd"), 0).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(sys.join("block/vdd/device/rescan")).unwrap(),
            "1"
        );
    }
}
