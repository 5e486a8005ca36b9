//! Where a hot-plugged VirtualDisk is inside the VM: QEMU shows it as a SCSI disk whose serial
//! is the md5 of the disk's UID, linked by udev as
//! `/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_<serial>` (as Deckhouse's driver looks it up). The
//! serial comes from ControllerPublish in the publish context, so the node needs no parent access.

use std::path::PathBuf;

use async_trait::async_trait;
use stratus_csi::devices::DeviceFinder;
use stratus_csi::BackendError;

use crate::names::by_id_name;

/// Discovery through `/dev/disk/by-id`.
#[derive(Debug, Clone)]
pub struct SerialDevices {
    /// `/dev` (a directory tree in tests).
    pub dev: PathBuf,
}

impl Default for SerialDevices {
    fn default() -> Self {
        SerialDevices {
            dev: PathBuf::from("/dev"),
        }
    }
}

#[async_trait]
impl DeviceFinder for SerialDevices {
    /// `hint` is the disk's serial; without it the device cannot be told apart.
    async fn locate(
        &self,
        volume_id: &str,
        hint: Option<&str>,
    ) -> Result<Option<PathBuf>, BackendError> {
        let serial = hint.filter(|s| !s.is_empty()).ok_or_else(|| {
            BackendError::InvalidArgument(format!(
                "volume {volume_id}: the publish context carries no disk serial"
            ))
        })?;
        let link = self.dev.join("disk/by-id").join(by_id_name(serial));
        Ok(std::fs::canonicalize(link).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn by_id_links_are_followed() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().to_path_buf();
        std::fs::create_dir_all(dev.join("disk/by-id")).unwrap();
        std::fs::write(dev.join("sdb"), "").unwrap();
        std::os::unix::fs::symlink(
            dev.join("sdb"),
            dev.join("disk/by-id/scsi-0QEMU_QEMU_HARDDISK_abc123"),
        )
        .unwrap();
        let finder = SerialDevices { dev: dev.clone() };
        assert_eq!(
            finder.locate("pvc-1", Some("abc123")).await.unwrap(),
            Some(std::fs::canonicalize(dev.join("sdb")).unwrap())
        );
        assert_eq!(finder.locate("pvc-1", Some("ffff")).await.unwrap(), None);
        assert!(finder.locate("pvc-1", None).await.is_err());
    }
}
