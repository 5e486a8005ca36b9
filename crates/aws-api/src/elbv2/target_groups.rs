//! The target-group calls of the ELBv2 client: describe by name, ARN, load balancer or all
//! (paged), create, health check and attributes, delete; the targets with their health,
//! registered and deregistered in batches.

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{Matcher, ProtocolEnum, TargetDescription, TargetGroupAttribute};
use stratus_cloud::CloudError;

use super::values::{
    HealthCheckSettings, NewTargetGroup, TargetGroup, TargetHealthState, TargetRef,
};
use super::{gone, is_code, missing, tags, ElbV2Api, PAGE_SIZE, TARGET_BATCH};
use crate::pager::pages;
use std::collections::BTreeMap;

impl ElbV2Api {
    /// The target group named `name`, if it exists.
    pub async fn target_group(&self, name: &str) -> Result<Option<TargetGroup>, CloudError> {
        match self
            .api
            .call("DescribeTargetGroups", || {
                self.client.describe_target_groups().names(name).send()
            })
            .await
        {
            Ok(out) => Ok(out.target_groups().first().map(TargetGroup::of)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The target group with this ARN, if it exists.
    pub async fn target_group_info(&self, arn: &str) -> Result<Option<TargetGroup>, CloudError> {
        match self
            .api
            .call("DescribeTargetGroups", || {
                self.client
                    .describe_target_groups()
                    .target_group_arns(arn)
                    .send()
            })
            .await
        {
            Ok(out) => Ok(out.target_groups().first().map(|g| {
                let mut g = TargetGroup::of(g);
                if g.arn.is_empty() {
                    g.arn = arn.to_string();
                }
                g
            })),
            Err(e) if is_code(&e, "TargetGroupNotFound") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Target groups attached to a load balancer (none when it has no listener yet: e.g. its
    /// creator was killed between CreateLoadBalancer and CreateListener).
    pub async fn target_groups_of(&self, lb_arn: &str) -> Result<Vec<TargetGroup>, CloudError> {
        match self
            .api
            .call("DescribeTargetGroups", || {
                self.client
                    .describe_target_groups()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await
        {
            Ok(out) => Ok(out.target_groups().iter().map(TargetGroup::of).collect()),
            // AWS answers an empty list; moto (and older endpoints) this error.
            Err(e) if is_code(&e, "TargetGroupNotFound") => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Every target group of the region (all pages).
    pub async fn all_target_groups(&self) -> Result<Vec<TargetGroup>, CloudError> {
        let mut all = Vec::new();
        pages(
            &self.api,
            "DescribeTargetGroups",
            |marker| {
                self.client
                    .describe_target_groups()
                    .page_size(PAGE_SIZE)
                    .set_marker(marker)
                    .send()
            },
            |page| {
                all.extend(page.target_groups().iter().map(TargetGroup::of));
                page.next_marker().map(str::to_string)
            },
        )
        .await?;
        Ok(all)
    }

    /// Creates a target group; its ARN.
    pub async fn create_target_group(
        &self,
        new: &NewTargetGroup<'_>,
    ) -> Result<String, CloudError> {
        let h = new.health_check;
        let out = self
            .api
            .call("CreateTargetGroup", || {
                self.client
                    .create_target_group()
                    .name(new.name)
                    .protocol(new.protocol.clone())
                    .port(new.port)
                    .vpc_id(new.vpc_id)
                    .target_type(new.target_type.clone())
                    .health_check_protocol(ProtocolEnum::from(h.protocol.as_str()))
                    .health_check_port(&h.port)
                    .set_health_check_path(h.path.clone())
                    .health_check_interval_seconds(h.interval)
                    .health_check_timeout_seconds(h.timeout)
                    .healthy_threshold_count(h.healthy_threshold)
                    .unhealthy_threshold_count(h.unhealthy_threshold)
                    .set_matcher(matcher(h))
                    .set_tags(Some(tags(new.tags)))
                    .send()
            })
            .await?;
        out.target_groups()
            .first()
            .and_then(|g| g.target_group_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateTargetGroup"))
    }

    /// Rewrites a target group's health check.
    pub async fn modify_health_check(
        &self,
        arn: &str,
        h: &HealthCheckSettings,
    ) -> Result<(), CloudError> {
        self.api
            .call("ModifyTargetGroup", || {
                self.client
                    .modify_target_group()
                    .target_group_arn(arn)
                    .health_check_protocol(ProtocolEnum::from(h.protocol.as_str()))
                    .health_check_port(&h.port)
                    .set_health_check_path(h.path.clone())
                    .health_check_interval_seconds(h.interval)
                    .health_check_timeout_seconds(h.timeout)
                    .healthy_threshold_count(h.healthy_threshold)
                    .unhealthy_threshold_count(h.unhealthy_threshold)
                    .set_matcher(matcher(h))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// The attributes of a target group.
    pub async fn target_group_attributes(
        &self,
        arn: &str,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let out = self
            .api
            .call("DescribeTargetGroupAttributes", || {
                self.client
                    .describe_target_group_attributes()
                    .target_group_arn(arn)
                    .send()
            })
            .await?;
        Ok(out
            .attributes()
            .iter()
            .filter_map(|a| Some((a.key()?.to_string(), a.value()?.to_string())))
            .collect())
    }

    /// Sets the given attributes of a target group, in this order (the others stay).
    pub async fn modify_target_group_attributes(
        &self,
        arn: &str,
        attributes: &[(String, String)],
    ) -> Result<(), CloudError> {
        let attrs: Vec<TargetGroupAttribute> = attributes
            .iter()
            .map(|(k, v)| TargetGroupAttribute::builder().key(k).value(v).build())
            .collect();
        self.api
            .call("ModifyTargetGroupAttributes", || {
                self.client
                    .modify_target_group_attributes()
                    .target_group_arn(arn)
                    .set_attributes(Some(attrs.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Deletes a target group; gone counts as deleted.
    pub async fn delete_target_group(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteTargetGroup", || {
                self.client
                    .delete_target_group()
                    .target_group_arn(arn)
                    .send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every target of a group with its port and health state.
    pub async fn target_health(&self, arn: &str) -> Result<Vec<TargetHealthState>, CloudError> {
        let out = self
            .api
            .call("DescribeTargetHealth", || {
                self.client
                    .describe_target_health()
                    .target_group_arn(arn)
                    .send()
            })
            .await?;
        Ok(out
            .target_health_descriptions()
            .iter()
            .filter_map(|d| {
                let t = d.target()?;
                Some(TargetHealthState {
                    target: TargetRef {
                        id: t.id()?.to_string(),
                        port: t.port().unwrap_or(0),
                    },
                    state: d
                        .target_health()
                        .and_then(|h| h.state())
                        .map_or("unknown".into(), |s| s.as_str().to_string()),
                })
            })
            .collect())
    }

    /// Registers targets, [`TARGET_BATCH`] per call (none: no call).
    pub async fn register_targets(
        &self,
        arn: &str,
        targets: &[TargetRef],
    ) -> Result<(), CloudError> {
        for chunk in targets.chunks(TARGET_BATCH) {
            let descriptions = descriptions(chunk);
            self.api
                .call("RegisterTargets", || {
                    self.client
                        .register_targets()
                        .target_group_arn(arn)
                        .set_targets(Some(descriptions.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Deregisters targets, [`TARGET_BATCH`] per call (none: no call).
    pub async fn deregister_targets(
        &self,
        arn: &str,
        targets: &[TargetRef],
    ) -> Result<(), CloudError> {
        for chunk in targets.chunks(TARGET_BATCH) {
            let descriptions = descriptions(chunk);
            self.api
                .call("DeregisterTargets", || {
                    self.client
                        .deregister_targets()
                        .target_group_arn(arn)
                        .set_targets(Some(descriptions.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }
}

/// The HTTP codes matcher, when the settings carry one.
fn matcher(h: &HealthCheckSettings) -> Option<Matcher> {
    h.http_codes
        .as_ref()
        .map(|c| Matcher::builder().http_code(c).build())
}

fn descriptions(targets: &[TargetRef]) -> Vec<TargetDescription> {
    targets
        .iter()
        .map(|t| TargetDescription::builder().id(&t.id).port(t.port).build())
        .collect()
}
