//! The shared backend security group, as upstream: one per cluster (`--backend-security-group`,
//! else `k8s-traffic-<cluster>-<hash>` tagged `elbv2.k8s.aws/cluster` and
//! `elbv2.k8s.aws/resource: backend-sg`, found by its tags or made once), attached beside the
//! managed frontend group of every ALB and NLB and named as the source of the internal
//! bindings' `spec.networking`, so only load balancers reach the targets. A group the
//! controller made is deleted when no load balancer carries it any more. The Ingress and
//! Service drivers share one [`SharedBackendGroup`], so they find or make it once.

use std::collections::BTreeMap;

use stratus_aws_api::{Ec2, ElbV2Api};
use stratus_cloud::CloudError;

use crate::ingress::plan::{clip, hash8};
use crate::ingress::tags::CLUSTER_TAG;

/// The resource tag key of the backend group.
pub const RESOURCE_TAG: &str = "elbv2.k8s.aws/resource";
/// Its value.
pub const RESOURCE: &str = "backend-sg";

/// Which backend group ALBs get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendGroup {
    /// None (`--enable-backend-security-group=false`): the targets' groups must admit the ALBs.
    Off,
    /// The controller's own.
    Managed,
    /// `--backend-security-group`.
    Given(String),
}

/// The backend group of this process: which one, and its ID once found or made.
#[derive(Debug)]
pub struct SharedBackendGroup {
    which: BackendGroup,
    id: tokio::sync::Mutex<Option<String>>,
}

impl SharedBackendGroup {
    /// Not looked up yet.
    pub fn new(which: BackendGroup) -> Self {
        SharedBackendGroup {
            which,
            id: tokio::sync::Mutex::new(None),
        }
    }

    /// The group's ID (found or made on first use), or None when turned off.
    pub async fn id(
        &self,
        ec2: &Ec2,
        vpc: &str,
        cluster: &str,
    ) -> Result<Option<String>, CloudError> {
        let mut cached = self.id.lock().await;
        if cached.is_none() {
            *cached = ensure(ec2, vpc, cluster, &self.which).await?;
        }
        Ok(cached.clone())
    }

    /// After a load balancer went: deletes the controller's group when no load balancer
    /// carries it any more (found or made again by the next one).
    pub async fn release_if_unused(
        &self,
        ec2: &Ec2,
        alb: &ElbV2Api,
        cluster: &str,
    ) -> Result<(), CloudError> {
        let mut cached = self.id.lock().await;
        release_if_unused(ec2, alb, cluster, &self.which).await?;
        *cached = None;
        Ok(())
    }
}

/// `k8s-traffic-<cluster>-<hash>`.
pub fn group_name(cluster: &str) -> String {
    format!("k8s-traffic-{}-{}", clip(cluster, 32), hash8(&[cluster]))
}

/// The backend group's ID (found by its tags, else made), or the given one.
pub async fn ensure(
    ec2: &Ec2,
    vpc: &str,
    cluster: &str,
    which: &BackendGroup,
) -> Result<Option<String>, CloudError> {
    match which {
        BackendGroup::Off => Ok(None),
        BackendGroup::Given(id) => Ok(Some(id.clone())),
        BackendGroup::Managed => {
            if let Some(id) = find(ec2, cluster).await? {
                return Ok(Some(id));
            }
            let tags = BTreeMap::from([
                (CLUSTER_TAG.to_string(), cluster.to_string()),
                (RESOURCE_TAG.to_string(), RESOURCE.to_string()),
            ]);
            let id = ec2
                .create_security_group(
                    vpc,
                    &group_name(cluster),
                    "[k8s] Shared Backend SecurityGroup for LoadBalancer",
                    &tags,
                )
                .await?;
            tracing::info!(group = %id, "shared backend security group made");
            Ok(Some(id))
        }
    }
}

/// The controller's backend group of `cluster`, if it exists.
pub async fn find(ec2: &Ec2, cluster: &str) -> Result<Option<String>, CloudError> {
    let groups = ec2
        .security_groups_tagged(RESOURCE_TAG, Some((RESOURCE_TAG, RESOURCE)))
        .await?;
    Ok(groups
        .into_iter()
        .find(|g| g.tags.get(CLUSTER_TAG).map(String::as_str) == Some(cluster))
        .map(|g| g.id))
}

/// Deletes the controller's backend group once no load balancer carries it (a given group is
/// never deleted).
pub async fn release_if_unused(
    ec2: &Ec2,
    alb: &ElbV2Api,
    cluster: &str,
    which: &BackendGroup,
) -> Result<(), CloudError> {
    if *which != BackendGroup::Managed {
        return Ok(());
    }
    let Some(id) = find(ec2, cluster).await? else {
        return Ok(());
    };
    if alb
        .any_load_balancer(|l| l.security_groups.contains(&id))
        .await?
    {
        return Ok(());
    }
    tracing::info!(group = %id, "no load balancer left: deleting the shared backend security group");
    ec2.delete_security_group(&id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_is_stable_and_short() {
        let n = group_name("prod");
        assert!(n.starts_with("k8s-traffic-prod-"), "{n}");
        assert_eq!(n, group_name("prod"));
        assert_ne!(n, group_name("stage"));
        assert!(group_name(&"x".repeat(300)).len() < 64);
    }
}
