//! The one ELBv2 client (application and network load balancers, listeners, rules, target
//! groups, targets, tags) of every Stratus application, through the shared call guard, paging
//! inside; it speaks AWS's shapes ([`values`]) and leaves the planning to its callers.

mod listeners;
mod load_balancers;
mod target_groups;
pub mod values;

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::Tag;
use stratus_cloud::CloudError;

use crate::call::AwsApi;

pub use values::{
    condition_values, ActionView, DefaultAction, HealthCheck, HealthCheckSettings, Listener,
    ListenerSettings, LoadBalancer, NewLoadBalancer, NewRule, NewTargetGroup, Placement, Rule,
    SubnetMapping, TargetGroup, TargetHealthState, TargetRef,
};

/// Most resources one DescribeTags call accepts.
pub const TAG_BATCH: usize = 20;
/// Most targets one RegisterTargets or DeregisterTargets call carries.
pub const TARGET_BATCH: usize = 200;
/// DescribeLoadBalancers and DescribeTargetGroups page size (the API's maximum).
const PAGE_SIZE: i32 = 400;

/// ELBv2 access.
#[derive(Debug, Clone)]
pub struct ElbV2Api {
    client: elbv2::Client,
    api: AwsApi,
}

impl ElbV2Api {
    /// Wraps an SDK client.
    pub fn new(client: elbv2::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// Tags of resources by ARN, [`TAG_BATCH`] ARNs per DescribeTags.
    pub async fn tags(
        &self,
        arns: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, CloudError> {
        let mut all = BTreeMap::new();
        for chunk in arns.chunks(TAG_BATCH) {
            let out = self
                .api
                .call("DescribeTags", || {
                    self.client
                        .describe_tags()
                        .set_resource_arns(Some(chunk.to_vec()))
                        .send()
                })
                .await?;
            all.extend(out.tag_descriptions().iter().filter_map(|d| {
                let t = d
                    .tags()
                    .iter()
                    .filter_map(|t| {
                        Some((t.key()?.to_string(), t.value().unwrap_or("").to_string()))
                    })
                    .collect();
                Some((d.resource_arn()?.to_string(), t))
            }));
        }
        Ok(all)
    }

    /// Adds or overwrites tags of one resource.
    pub async fn add_tags(
        &self,
        arn: &str,
        wanted: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        self.api
            .call("AddTags", || {
                self.client
                    .add_tags()
                    .resource_arns(arn)
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await
            .map(|_| ())
    }
}

/// Whether AWS answered that the load balancer, target group, listener or rule is not there.
pub fn gone(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. }
        if code == "LoadBalancerNotFound" || code == "TargetGroupNotFound"
            || code == "ListenerNotFound" || code == "RuleNotFound")
}

fn is_code(e: &CloudError, wanted: &str) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == wanted)
}

fn tags(t: &BTreeMap<String, String>) -> Vec<Tag> {
    t.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

fn missing(op: &str) -> CloudError {
    CloudError::Unavailable {
        operation: op.into(),
        message: "empty answer".into(),
    }
}
