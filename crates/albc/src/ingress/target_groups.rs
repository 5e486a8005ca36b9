//! Target-group steps the Ingress and Service drivers share, over the ELBv2 client: the groups
//! of a stack found by their tags, and attributes held at their planned values.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::TargetTypeEnum;
use stratus_aws_api::ElbV2Api;
use stratus_cloud::CloudError;

use crate::ingress::drift;
use crate::ingress::live::LiveTargetGroup;

/// Every target group of the region (one paged listing) and those of them (name, ARN) whose
/// tags carry every `(key, value)` of `selector` (DescribeTags, 20 ARNs per call).
pub async fn stack_target_groups(
    alb: &ElbV2Api,
    selector: &BTreeMap<String, String>,
) -> Result<(Vec<LiveTargetGroup>, Vec<(String, String)>), CloudError> {
    let all: Vec<LiveTargetGroup> = alb
        .all_target_groups()
        .await?
        .iter()
        .filter_map(LiveTargetGroup::of)
        .collect();
    let pairs: Vec<(String, String)> = all
        .iter()
        .map(|g| (g.name.clone(), g.arn.clone()))
        .collect();
    let tagged = having_tags(alb, &pairs, selector).await?;
    Ok((all, tagged))
}

/// `ip` targets, else `instance` ones.
pub fn target_type(ip: bool) -> TargetTypeEnum {
    if ip {
        TargetTypeEnum::Ip
    } else {
        TargetTypeEnum::Instance
    }
}

/// Target groups (name, ARN) whose tags carry every `(key, value)` of `selector` (one paged
/// listing, then DescribeTags 20 ARNs per call).
pub async fn tagged_target_groups(
    alb: &ElbV2Api,
    selector: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, CloudError> {
    let all: Vec<(String, String)> = alb
        .all_target_groups()
        .await?
        .into_iter()
        .filter(|g| !g.name.is_empty() && !g.arn.is_empty())
        .map(|g| (g.name, g.arn))
        .collect();
    having_tags(alb, &all, selector).await
}

/// Those of `groups` (name, ARN) whose tags carry every `(key, value)` of `selector`.
async fn having_tags(
    alb: &ElbV2Api,
    groups: &[(String, String)],
    selector: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, CloudError> {
    let arns: Vec<String> = groups.iter().map(|(_, a)| a.clone()).collect();
    let tags = alb.tags(&arns).await?;
    Ok(groups
        .iter()
        .filter(|(_, arn)| {
            tags.get(arn).is_some_and(|have| {
                selector
                    .iter()
                    .all(|(k, v)| have.get(k.as_str()) == Some(v))
            })
        })
        .cloned()
        .collect())
}

/// Brings a target group's `wanted` attributes to their values: nothing when none is planned,
/// else one read and one write of the differing ones (`fresh`: just created, nothing to read).
pub async fn hold_target_group_attributes(
    alb: &ElbV2Api,
    arn: &str,
    wanted: &BTreeMap<String, String>,
    fresh: bool,
) -> Result<(), CloudError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let live = if fresh {
        BTreeMap::new()
    } else {
        alb.target_group_attributes(arn).await?
    };
    let set: Vec<(String, String)> = drift::differing(&live, wanted).into_iter().collect();
    if set.is_empty() {
        return Ok(());
    }
    alb.modify_target_group_attributes(arn, &set).await
}
