//! The test-control handle's way to leave behind what upstream OCCM would have made, so that
//! adoption can be tested: a load balancer created through Octavia's own create path (fully
//! populated, as the project's user), and a floating IP attached to its VIP port; and a tagged
//! subnet on an existing network (floating subnets chosen by name or tags).

use axum::body::Bytes;
use axum::extract::{Extension, State};
use serde_json::Value;

use crate::auth::Caller;
use crate::SimHandle;

impl SimHandle {
    /// Creates a load balancer from an Octavia create body (`{"loadbalancer": {...}}`) in the
    /// default project, as a user would; returns it (PENDING_CREATE, then ACTIVE after the
    /// configured delay) or Octavia's error message.
    pub async fn create_load_balancer(&self, body: &Value) -> Result<Value, String> {
        let project = self.sim.state().default_project.clone();
        let caller = Caller {
            project_id: project,
            user_id: "occm".into(),
            is_admin: false,
        };
        let bytes = Bytes::from(serde_json::to_vec(body).map_err(|e| e.to_string())?);
        let response = crate::octavia::create(State(self.sim.clone()), Extension(caller), bytes)
            .await
            .map_err(|e| e.message)?;
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        Ok(v["loadbalancer"].clone())
    }

    /// Attaches floating IP `fip` to `port` (its IPv4 address).
    pub fn attach_floating_ip(&self, fip: &str, port: &str) -> Result<(), String> {
        let mut state = self.sim.state();
        crate::neutron::associate(&mut state, fip, port, None).map_err(|e| e.message)
    }

    /// Adds subnet `name` (`cidr`, with `tags`) to network `network`; returns its id.
    pub fn add_subnet(
        &self,
        network: &str,
        name: &str,
        cidr: &str,
        tags: &[&str],
    ) -> Result<String, crate::handle::SimError> {
        let mut state = self.sim.state();
        let project = state.default_project.clone();
        let id = state.add_subnet(&project, network, name, cidr)?;
        if let Some(s) = state.neutron.subnets.get_mut(&id) {
            s["tags"] = serde_json::json!(tags);
        }
        Ok(id)
    }
}
