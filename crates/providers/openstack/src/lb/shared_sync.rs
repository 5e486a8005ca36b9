//! Leaving a shared load balancer: the Service's own listeners and pools are deleted one step at
//! a time (each makes the load balancer PENDING_UPDATE, so the answer is "pending" until none is
//! left), then its tag is taken off; the load balancer, others' listeners and the floating IP
//! stay.

use serde_json::Value;
use stratus_cloud::{CloudError, ServiceRef};

use super::octavia::is_conflict;
use super::spec::{plan_step, LbSpec};
use super::{pending, shared, text, OpenStackLoadBalancers};

impl OpenStackLoadBalancers {
    /// Takes Service `name`'s listeners, pools and tag off load balancer `lb` (ACTIVE).
    pub(super) async fn leave_shared(
        &self,
        name: &str,
        lb: &Value,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        let id = text(lb, "id");
        let owner = lb["name"] == name;
        let tree = shared::ours(self.octavia.tree(&id).await?, name, owner);
        let nothing = LbSpec {
            name: name.to_owned(),
            description: String::new(),
            vip_subnet_id: None,
            vip_network_id: None,
            provider: String::new(),
            flavor_id: None,
            availability_zone: None,
            listeners: Vec::new(),
        };
        let step = plan_step(&tree, &nothing);
        let busy = match &step {
            Some(step) => {
                tracing::info!(lb = %id, step = ?step, "removing a Service's part of a shared load balancer");
                self.octavia.apply(&id, step).await
            }
            None => match shared::tags_without(lb, name) {
                Some(tags) => {
                    tracing::info!(lb = %id, "taking a Service's tag off a shared load balancer");
                    self.octavia.set_tags(&id, &tags).await
                }
                None => {
                    self.forget(name);
                    return Ok(());
                }
            },
        };
        match busy {
            Ok(()) => {}
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
        self.forget(name);
        self.watcher.watch(&id, service.key());
        Err(pending(format!("leaving shared load balancer {id}")))
    }
}
