//! Every ELBv2 load balancer and target group of the account with its tags (paged lists, then
//! DescribeTags 20 ARNs at a time), and the security groups tagged with this cluster (one
//! DescribeSecurityGroups filtered by EC2), through the shared ELBv2 and EC2 clients.

use stratus_aws_api::{Ec2, ElbV2Api};
use stratus_cloud::CloudError;

use crate::reaper::plan::{Kind, Tagged};

/// The tags of `arns` (DescribeTags, 20 ARNs per call), in the listing's order.
async fn with_tags(
    alb: &ElbV2Api,
    arns: Vec<String>,
    kind: Kind,
    into: &mut Vec<Tagged>,
) -> Result<(), CloudError> {
    let mut tags = alb.tags(&arns).await?;
    for arn in arns {
        if let Some(tags) = tags.remove(&arn) {
            into.push(Tagged { arn, kind, tags });
        }
    }
    Ok(())
}

/// Every load balancer and target group with its tags.
pub async fn tagged_resources(alb: &ElbV2Api) -> Result<Vec<Tagged>, CloudError> {
    let mut out = Vec::new();
    let lbs = alb.all_load_balancers().await?;
    let lbs = lbs.into_iter().map(|l| l.arn).filter(|a| !a.is_empty());
    with_tags(alb, lbs.collect(), Kind::LoadBalancer, &mut out).await?;
    let tgs = alb.all_target_groups().await?;
    let tgs = tgs.into_iter().map(|g| g.arn).filter(|a| !a.is_empty());
    with_tags(alb, tgs.collect(), Kind::TargetGroup, &mut out).await?;
    Ok(out)
}

/// The security groups carrying `cluster`'s cluster tag (the managed ALB groups among them).
pub async fn tagged_security_groups(ec2: &Ec2, cluster: &str) -> Result<Vec<Tagged>, CloudError> {
    let key = crate::ingress::tags::CLUSTER_TAG;
    Ok(ec2
        .security_groups_tagged(key, Some((key, cluster)))
        .await?
        .into_iter()
        .map(|g| Tagged {
            arn: g.id,
            kind: Kind::SecurityGroup,
            tags: g.tags,
        })
        .collect())
}
