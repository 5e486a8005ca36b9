//! The reaper: deletes load balancers and security groups this cluster made for Services that
//! no longer exist (a Service deleted while the controller was down, a finalizer removed by
//! hand). Runs periodically, never per reconcile.

use std::collections::BTreeSet;

use stratus_cloud::CloudError;

use crate::lb::classic::managed_group_name;
use crate::lb::tags::{cluster_tag_key, owned_service_resource, OWNED, SERVICE_NAME_TAG};
use crate::lb::{tags_in_batches, AwsLoadBalancers};

impl AwsLoadBalancers {
    /// Deletes what belongs to no live load-balancer name; returns how many load balancers went.
    pub(super) async fn reap_orphans(&self, live: &BTreeSet<String>) -> Result<usize, CloudError> {
        let candidates: Vec<String> = self
            .elb
            .list_names()
            .await?
            .into_iter()
            .filter(|n| !live.contains(n))
            .collect();
        let mut reaped = 0;
        for (name, tags) in tags_in_batches(&self.elb, &candidates).await? {
            if owned_service_resource(&tags, &self.cluster_id) {
                tracing::info!(lb = %name, service = ?tags.get(SERVICE_NAME_TAG), "reaping orphaned load balancer");
                self.delete_classic(&name).await?;
                self.forget(&name);
                reaped += 1;
            }
        }
        let key = cluster_tag_key(&self.cluster_id);
        let groups = self
            .ec2
            .security_groups_tagged(SERVICE_NAME_TAG, Some((&key, OWNED)))
            .await?;
        for g in groups {
            let Some(lb) = g.name.strip_prefix(&managed_group_name("")) else {
                continue;
            };
            if !live.contains(lb) {
                tracing::info!(group = %g.id, lb, "reaping orphaned security group");
                self.delete_classic(lb).await?;
            }
        }
        Ok(reaped)
    }
}
