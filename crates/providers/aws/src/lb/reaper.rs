//! The reaper: deletes load balancers and security groups this cluster made for Services that
//! no longer exist (a Service deleted while the controller was down, a finalizer removed by
//! hand), and the cluster's backend security group once no Classic ELB needs it. Runs
//! periodically and shortly after a Service's load balancer was deleted, never per reconcile.

use std::collections::BTreeSet;

use stratus_cloud::CloudError;

use crate::lb::classic::managed_group_name;
use crate::lb::network_spec::LOAD_BALANCER_TAG;
use crate::lb::{tags_in_batches, AwsLoadBalancers};
use stratus_aws_api::elbv2::TAG_BATCH;
use stratus_aws_api::tags::{cluster_tag_key, owned_service_resource, OWNED, SERVICE_NAME_TAG};

impl AwsLoadBalancers {
    /// Deletes what belongs to no live load-balancer name; returns how many load balancers went.
    pub(super) async fn reap_orphans(&self, live: &BTreeSet<String>) -> Result<usize, CloudError> {
        let classic: BTreeSet<String> = self.elb.list_names().await?.into_iter().collect();
        let candidates: Vec<String> = classic
            .iter()
            .filter(|n| !live.contains(*n))
            .cloned()
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
        let (network_reaped, network) = self.reap_network(live).await?;
        reaped += network_reaped;
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
        // The backend group serves Classic ELBs only; it goes when none is left and no live
        // Service is still waiting for its load balancer.
        let classic_in_use = live.iter().any(|n| classic.contains(n));
        let waiting = live
            .iter()
            .any(|n| !classic.contains(n) && !network.contains(n));
        if !classic_in_use && !waiting && self.delete_backend_group().await? {
            tracing::info!("no Classic ELB left; removed the cluster's backend security group");
        }
        Ok(reaped)
    }
}

impl AwsLoadBalancers {
    /// NLBs and target groups of no live load-balancer name; returns how many NLBs went and
    /// the names of all ELBv2 load balancers seen.
    async fn reap_network(
        &self,
        live: &BTreeSet<String>,
    ) -> Result<(usize, BTreeSet<String>), CloudError> {
        let all: Vec<(String, String)> = self
            .elbv2
            .all_load_balancers()
            .await?
            .into_iter()
            .filter(|l| !l.name.is_empty() && !l.arn.is_empty())
            .map(|l| (l.name, l.arn))
            .collect();
        let names: BTreeSet<String> = all.iter().map(|(n, _)| n.clone()).collect();
        let candidates: Vec<(String, String)> = all
            .into_iter()
            .filter(|(name, _)| !live.contains(name))
            .collect();
        let arns: Vec<String> = candidates.iter().map(|(_, arn)| arn.clone()).collect();
        let mut tags = std::collections::BTreeMap::new();
        for chunk in arns.chunks(TAG_BATCH) {
            tags.extend(self.elbv2.tags(chunk).await?);
        }
        let mut reaped = 0;
        for (name, arn) in &candidates {
            if tags
                .get(arn)
                .is_some_and(|t| owned_service_resource(t, &self.cluster_id))
            {
                tracing::info!(lb = %name, "reaping orphaned NLB");
                self.delete_network(name).await?;
                self.forget(name);
                reaped += 1;
            }
        }
        let groups: Vec<String> = self
            .elbv2
            .all_target_groups()
            .await?
            .into_iter()
            .map(|g| g.arn)
            .filter(|arn| !arn.is_empty())
            .collect();
        for chunk in groups.chunks(TAG_BATCH) {
            for (arn, t) in self.elbv2.tags(chunk).await? {
                let orphan = owned_service_resource(&t, &self.cluster_id)
                    && t.get(LOAD_BALANCER_TAG)
                        .is_some_and(|lb| !live.contains(lb));
                if orphan {
                    tracing::info!(target_group = %arn, "reaping orphaned target group");
                    self.elbv2.delete_target_group(&arn).await?;
                }
            }
        }
        Ok((reaped, names))
    }
}
