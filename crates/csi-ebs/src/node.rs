//! The EBS node backend: node ID, zone and attach limit, and where an attached volume's device
//! is. [`NvmeDevices`] reads `/sys/class/nvme/*/serial` (the volume ID without its dash) and the
//! model "Amazon Elastic Block Store" directly, so no udev symlink is needed, with the
//! attacher's device name as the fallback on Xen instances; [`LoopDevices`] stands a loop device
//! in for each volume so tests run the real node path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{NodeBackend, Topology};
use stratus_csi::devices::wait_for_device;
pub use stratus_csi::devices::{DeviceFinder, LoopDevices};
use stratus_csi::BackendError;

use crate::controller::DEVICE_PATH;
use crate::{TOPOLOGY_KEY, WELL_KNOWN_ZONE_KEY};

/// One NVMe controller as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmeController {
    /// `nvme0`.
    pub name: String,
    /// The serial (`vol0123…` on EBS).
    pub serial: String,
    /// The model.
    pub model: String,
    /// Its namespaces (`nvme0n1`).
    pub namespaces: Vec<String>,
}

/// The EBS model string of NVMe controllers.
pub const EBS_MODEL: &str = "Amazon Elastic Block Store";

/// The namespace device of `volume_id` among the controllers (pure).
pub fn match_nvme(controllers: &[NvmeController], volume_id: &str) -> Option<String> {
    let serial = volume_id.replacen('-', "", 1);
    controllers
        .iter()
        .filter(|c| c.model.trim() == EBS_MODEL)
        .find(|c| c.serial.trim() == serial || c.serial.trim() == volume_id)
        .and_then(|c| {
            let mut ns = c.namespaces.clone();
            ns.sort();
            ns.into_iter().next()
        })
}

/// NVMe discovery through sysfs.
#[derive(Debug, Clone)]
pub struct NvmeDevices {
    /// `/sys` (a directory tree in tests).
    pub sys: PathBuf,
    /// `/dev`.
    pub dev: PathBuf,
}

impl Default for NvmeDevices {
    fn default() -> Self {
        Self {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
        }
    }
}

fn read_trim(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl NvmeDevices {
    fn controllers(&self) -> Vec<NvmeController> {
        let class = self.sys.join("class/nvme");
        let Ok(entries) = std::fs::read_dir(&class) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let dir = e.path();
                let namespaces = std::fs::read_dir(&dir)
                    .map(|d| {
                        d.flatten()
                            .map(|n| n.file_name().to_string_lossy().to_string())
                            .filter(|n| n.starts_with(&name) && n[name.len()..].starts_with('n'))
                            .collect()
                    })
                    .unwrap_or_default();
                NvmeController {
                    serial: read_trim(&dir.join("serial")),
                    model: read_trim(&dir.join("model")),
                    name,
                    namespaces,
                }
            })
            .collect()
    }
}

#[async_trait]
impl DeviceFinder for NvmeDevices {
    async fn locate(
        &self,
        volume_id: &str,
        hint: Option<&str>,
    ) -> Result<Option<PathBuf>, BackendError> {
        if let Some(ns) = match_nvme(&self.controllers(), volume_id) {
            return Ok(Some(self.dev.join(ns)));
        }
        // Xen instances: the device name the attacher chose (`/dev/xvdba`), or its `sd` twin.
        if let Some(hint) = hint {
            for candidate in [hint.to_string(), hint.replacen("/dev/sd", "/dev/xvd", 1)] {
                if Path::new(&candidate).exists() {
                    return Ok(Some(PathBuf::from(candidate)));
                }
            }
        }
        Ok(None)
    }
}

/// The EBS node backend.
pub struct EbsNode {
    node_id: String,
    zone: String,
    max_volumes: i64,
    finder: Arc<dyn DeviceFinder>,
    wait: Duration,
}

impl EbsNode {
    /// A node `node_id` (the instance ID) in `zone`, allowing `max_volumes` attachments,
    /// waiting up to `wait` for devices to appear.
    pub fn new(
        node_id: String,
        zone: String,
        max_volumes: i64,
        finder: Arc<dyn DeviceFinder>,
        wait: Duration,
    ) -> EbsNode {
        EbsNode {
            node_id,
            zone,
            max_volumes,
            finder,
            wait,
        }
    }
}

#[async_trait]
impl NodeBackend for EbsNode {
    fn node_id(&self) -> String {
        self.node_id.clone()
    }

    fn max_volumes(&self) -> i64 {
        self.max_volumes
    }

    fn topology(&self) -> Topology {
        [
            (TOPOLOGY_KEY.to_string(), self.zone.clone()),
            (WELL_KNOWN_ZONE_KEY.to_string(), self.zone.clone()),
        ]
        .into_iter()
        .collect()
    }

    async fn find_device(
        &self,
        volume_id: &str,
        publish_context: &BTreeMap<String, String>,
    ) -> Result<PathBuf, BackendError> {
        let hint = publish_context.get(DEVICE_PATH).map(String::as_str);
        wait_for_device(
            self.finder.as_ref(),
            volume_id,
            hint,
            self.wait,
            "NVMe serial",
        )
        .await
    }

    async fn rescan(
        &self,
        volume_id: &str,
        device: &Path,
        required_bytes: i64,
    ) -> Result<(), BackendError> {
        self.finder.rescan(volume_id, device, required_bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(name: &str, serial: &str, model: &str) -> NvmeController {
        NvmeController {
            name: name.into(),
            serial: serial.into(),
            model: model.into(),
            namespaces: vec![format!("{name}n1")],
        }
    }

    #[test]
    fn nvme_serials_match_volume_ids() {
        let cs = vec![
            ctrl("nvme0", "AWS1234", "Amazon EC2 NVMe Instance Storage"),
            ctrl("nvme1", "vol0abc", EBS_MODEL),
            ctrl("nvme2", "vol0def ", &format!("{EBS_MODEL}  ")),
        ];
        assert_eq!(match_nvme(&cs, "vol-0abc").as_deref(), Some("nvme1n1"));
        assert_eq!(match_nvme(&cs, "vol-0def").as_deref(), Some("nvme2n1"));
        assert_eq!(match_nvme(&cs, "vol-0zzz"), None);
        assert_eq!(
            match_nvme(&cs, "AWS1234"),
            None,
            "instance storage is not EBS"
        );
    }

    #[tokio::test]
    async fn sysfs_tree_is_read() {
        let root = tempfile::tempdir().unwrap();
        let c = root.path().join("class/nvme/nvme3");
        std::fs::create_dir_all(c.join("nvme3n1")).unwrap();
        std::fs::write(c.join("serial"), "vol0123456789\n").unwrap();
        std::fs::write(c.join("model"), format!("{EBS_MODEL}\n")).unwrap();
        let finder = NvmeDevices {
            sys: root.path().to_path_buf(),
            dev: PathBuf::from("/dev"),
        };
        assert_eq!(
            finder.locate("vol-0123456789", None).await.unwrap(),
            Some(PathBuf::from("/dev/nvme3n1"))
        );
        assert_eq!(
            finder.locate("vol-0999", Some("/dev/xvdzz")).await.unwrap(),
            None
        );
    }
}
