//! The DVP node backend: the node's ID (the tenant node name, which the VM carries as its
//! hostname label), the attach limit, and where an attached disk's device is, through the core's
//! [`DeviceFinder`] seam with the serial ControllerPublish handed over.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{NodeBackend, Topology};
use stratus_csi::devices::{wait_for_device, DeviceFinder};
use stratus_csi::BackendError;

use crate::SERIAL_KEY;

/// The attach limit NodeGetInfo reports unless `--max-volumes-per-node` says otherwise.
pub const DEFAULT_ATTACH_LIMIT: i64 = 62;

/// The DVP node backend.
pub struct DvpNode {
    node_id: String,
    max_volumes: i64,
    finder: Arc<dyn DeviceFinder>,
    wait: Duration,
}

impl DvpNode {
    /// The node `node_id`, allowing `max_volumes` attachments, waiting up to `wait` for devices.
    pub fn new(
        node_id: String,
        max_volumes: i64,
        finder: Arc<dyn DeviceFinder>,
        wait: Duration,
    ) -> DvpNode {
        DvpNode {
            node_id,
            max_volumes,
            finder,
            wait,
        }
    }
}

#[async_trait]
impl NodeBackend for DvpNode {
    fn node_id(&self) -> String {
        self.node_id.clone()
    }

    fn max_volumes(&self) -> i64 {
        self.max_volumes
    }

    fn topology(&self) -> Topology {
        Topology::new()
    }

    async fn find_device(
        &self,
        volume_id: &str,
        publish_context: &BTreeMap<String, String>,
    ) -> Result<PathBuf, BackendError> {
        let serial = publish_context.get(SERIAL_KEY).map(String::as_str);
        wait_for_device(
            self.finder.as_ref(),
            volume_id,
            serial,
            self.wait,
            "/dev/disk/by-id serial",
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
