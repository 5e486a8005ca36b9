//! The Cinder node backend: node ID (the Nova server), zone and attach limit
//! (`[BlockStorage] node-volume-attach-limit`, 256 by default as upstream), and where an
//! attached volume's device is, through the core's [`DeviceFinder`] seam.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{NodeBackend, Topology};
use stratus_csi::devices::{wait_for_device, DeviceFinder};
use stratus_csi::BackendError;

use crate::{DEVICE_PATH, TOPOLOGY_KEY};

/// The attach limit when `[BlockStorage] node-volume-attach-limit` is not set.
pub const DEFAULT_ATTACH_LIMIT: i64 = 256;

/// The Cinder node backend.
pub struct CinderNode {
    node_id: String,
    zone: String,
    /// `--with-topology=false`: no topology reported.
    topology_aware: bool,
    /// `--additional-topology`.
    additional: Vec<(String, String)>,
    max_volumes: i64,
    finder: Arc<dyn DeviceFinder>,
    wait: Duration,
}

impl CinderNode {
    /// A node `node_id` (the server's UUID) in `zone`, allowing `max_volumes` attachments,
    /// waiting up to `wait` for devices to appear.
    pub fn new(
        node_id: String,
        zone: String,
        max_volumes: i64,
        finder: Arc<dyn DeviceFinder>,
        wait: Duration,
    ) -> CinderNode {
        CinderNode {
            node_id,
            zone,
            topology_aware: true,
            additional: Vec::new(),
            max_volumes,
            finder,
            wait,
        }
    }
}

impl CinderNode {
    /// `--with-topology` and `--additional-topology`: whether the node reports its zone, and the
    /// extra keys it reports with it.
    pub fn with_topology(mut self, aware: bool, additional: &[(String, String)]) -> CinderNode {
        self.topology_aware = aware;
        self.additional = additional.to_vec();
        self
    }
}

#[async_trait]
impl NodeBackend for CinderNode {
    fn node_id(&self) -> String {
        self.node_id.clone()
    }

    fn max_volumes(&self) -> i64 {
        self.max_volumes
    }

    fn topology(&self) -> Topology {
        if !self.topology_aware {
            return Topology::new();
        }
        std::iter::once((TOPOLOGY_KEY.to_string(), self.zone.clone()))
            .chain(self.additional.iter().cloned())
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
            "virtio serial",
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
