//! The test-control handle's block-storage side: the volumes and attachments as they are (for
//! leak and duplicate checks), and the attach/detach transition delay.

use std::time::Duration;

use serde_json::Value;

use crate::attachments::Attachment;
use crate::SimHandle;

impl SimHandle {
    /// Every volume, as Cinder shows it to an admin (oldest first).
    pub fn volumes(&self) -> Vec<Value> {
        let state = self.sim.state();
        let mut out: Vec<Value> = state.volumes.values().cloned().collect();
        out.sort_by_key(|v| v["_seq"].as_u64());
        out
    }

    /// Every volume attachment (attaching, attached or detaching).
    pub fn attachments(&self) -> Vec<Attachment> {
        self.sim.state().attachments.values().cloned().collect()
    }

    /// Sets the attaching → attached and detaching → gone delay.
    pub fn set_attach_delay(&self, delay: Duration) {
        self.update_knobs(|k| k.attach_delay = delay);
    }
}
