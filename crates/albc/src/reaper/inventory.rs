//! Every ELBv2 load balancer and target group of the account with its tags (paged lists, then
//! DescribeTags 20 ARNs at a time), and the security groups tagged with this cluster (one
//! DescribeSecurityGroups filtered by EC2), through the shared AWS call guard.

use std::collections::BTreeMap;

use stratus_cloud::CloudError;

use crate::ingress::alb_api::AlbApi;
use crate::reaper::plan::{Kind, Tagged};

/// DescribeTags takes at most 20 ARNs.
const TAGS_PER_CALL: usize = 20;

async fn load_balancer_arns(alb: &AlbApi) -> Result<Vec<String>, CloudError> {
    let mut arns = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = alb
            .api
            .call("DescribeLoadBalancers", || {
                alb.client
                    .describe_load_balancers()
                    .page_size(400)
                    .set_marker(marker.clone())
                    .send()
            })
            .await?;
        arns.extend(
            out.load_balancers()
                .iter()
                .filter_map(|l| l.load_balancer_arn().map(str::to_string)),
        );
        marker = out.next_marker().map(str::to_string);
        if marker.is_none() {
            return Ok(arns);
        }
    }
}

async fn target_group_arns(alb: &AlbApi) -> Result<Vec<String>, CloudError> {
    let mut arns = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = alb
            .api
            .call("DescribeTargetGroups", || {
                alb.client
                    .describe_target_groups()
                    .page_size(400)
                    .set_marker(marker.clone())
                    .send()
            })
            .await?;
        arns.extend(
            out.target_groups()
                .iter()
                .filter_map(|g| g.target_group_arn().map(str::to_string)),
        );
        marker = out.next_marker().map(str::to_string);
        if marker.is_none() {
            return Ok(arns);
        }
    }
}

async fn with_tags(
    alb: &AlbApi,
    arns: Vec<String>,
    kind: Kind,
    into: &mut Vec<Tagged>,
) -> Result<(), CloudError> {
    for chunk in arns.chunks(TAGS_PER_CALL) {
        let out = alb
            .api
            .call("DescribeTags", || {
                alb.client
                    .describe_tags()
                    .set_resource_arns(Some(chunk.to_vec()))
                    .send()
            })
            .await?;
        for d in out.tag_descriptions() {
            let Some(arn) = d.resource_arn() else {
                continue;
            };
            let tags: BTreeMap<String, String> = d
                .tags()
                .iter()
                .filter_map(|t| {
                    Some((
                        t.key()?.to_string(),
                        t.value().unwrap_or_default().to_string(),
                    ))
                })
                .collect();
            into.push(Tagged {
                arn: arn.to_string(),
                kind,
                tags,
            });
        }
    }
    Ok(())
}

/// Every load balancer and target group with its tags.
pub async fn tagged_resources(alb: &AlbApi) -> Result<Vec<Tagged>, CloudError> {
    let mut out = Vec::new();
    let lbs = load_balancer_arns(alb).await?;
    with_tags(alb, lbs, Kind::LoadBalancer, &mut out).await?;
    let tgs = target_group_arns(alb).await?;
    with_tags(alb, tgs, Kind::TargetGroup, &mut out).await?;
    Ok(out)
}

/// The security groups carrying `cluster`'s cluster tag (the managed ALB groups among them).
pub async fn tagged_security_groups(
    ec2: &stratus_aws::ec2::Ec2,
    cluster: &str,
) -> Result<Vec<Tagged>, CloudError> {
    let key = crate::ingress::controller::CLUSTER_TAG;
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
