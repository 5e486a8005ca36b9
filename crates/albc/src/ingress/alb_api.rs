//! The ELBv2 calls of the Ingress driver for load balancers and backend target groups (the
//! listener and rule calls are in [`crate::ingress::listener_api`]), each through the shared AWS
//! call guard.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    IpAddressType, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum, Tag, TargetTypeEnum,
};
use stratus_aws::api_call::AwsApi;
use stratus_cloud::CloudError;

pub use crate::ingress::listener_api::{condition_values, sorted_extra, LiveListener, LiveRule};
use crate::ingress::model::TargetGroupSpec;

/// An existing application load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlbState {
    /// ARN.
    pub arn: String,
    /// DNS name (the Ingress hostname).
    pub dns_name: String,
    /// Internet-facing (else internal).
    pub internet_facing: bool,
    /// `dualstack` (else `ipv4`).
    pub dualstack: bool,
    /// Its security groups, sorted.
    pub security_groups: Vec<String>,
    /// Its subnets, sorted.
    pub subnets: Vec<String>,
}

impl AlbState {
    /// The state of a described or created load balancer.
    pub(crate) fn of(l: &elbv2::types::LoadBalancer) -> Self {
        let mut security_groups = l.security_groups().to_vec();
        security_groups.sort();
        let mut subnets: Vec<String> = l
            .availability_zones()
            .iter()
            .filter_map(|z| z.subnet_id().map(str::to_string))
            .collect();
        subnets.sort();
        AlbState {
            arn: l.load_balancer_arn().unwrap_or_default().to_string(),
            dns_name: l.dns_name().unwrap_or_default().to_string(),
            internet_facing: l.scheme() == Some(&LoadBalancerSchemeEnum::InternetFacing),
            dualstack: l.ip_address_type() == Some(&IpAddressType::Dualstack),
            security_groups,
            subnets,
        }
    }
}

/// An application load balancer to create.
#[derive(Debug, Clone)]
pub struct NewAlb<'a> {
    /// Its name.
    pub name: &'a str,
    /// Internet-facing (else internal).
    pub internet_facing: bool,
    /// `dualstack` (else `ipv4`).
    pub dualstack: bool,
    /// Subnet IDs.
    pub subnets: &'a [String],
    /// Security groups.
    pub security_groups: &'a [String],
    /// Tags.
    pub tags: &'a BTreeMap<String, String>,
}

/// A target group as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTargetGroup {
    /// Name.
    pub name: String,
    /// ARN.
    pub arn: String,
    /// Health check.
    pub health: crate::ingress::annotations::HealthCheck,
}

/// A target group to create.
#[derive(Debug, Clone)]
pub struct NewTargetGroup<'a> {
    /// Its name.
    pub name: &'a str,
    /// Traffic protocol.
    pub protocol: ProtocolEnum,
    /// Default port (targets carry their own).
    pub port: i32,
    /// `ip` targets (else `instance`).
    pub ip: bool,
    /// Health check.
    pub health: &'a crate::ingress::annotations::HealthCheck,
}

/// ELBv2 access for ALBs and NLBs (the NLB calls are in [`crate::service::nlb_api`]).
#[derive(Debug, Clone)]
pub struct AlbApi {
    pub(crate) client: elbv2::Client,
    pub(crate) api: AwsApi,
}

pub(crate) fn tags(t: &BTreeMap<String, String>) -> Vec<Tag> {
    t.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

pub(crate) fn gone(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. }
        if code == "LoadBalancerNotFound" || code == "TargetGroupNotFound"
            || code == "ListenerNotFound" || code == "RuleNotFound")
}

pub(crate) fn missing(op: &str) -> CloudError {
    CloudError::Unavailable {
        operation: op.into(),
        message: "empty answer".into(),
    }
}

impl AlbApi {
    /// Wraps an SDK client.
    pub fn new(client: elbv2::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// The load balancer named `name`, if any.
    pub async fn find(&self, name: &str) -> Result<Option<AlbState>, CloudError> {
        match self
            .api
            .call("DescribeLoadBalancers", || {
                self.client.describe_load_balancers().names(name).send()
            })
            .await
        {
            Ok(out) => Ok(out.load_balancers().first().map(AlbState::of)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether any load balancer of the account carries security group `id` (all pages).
    pub async fn any_load_balancer_carries(&self, id: &str) -> Result<bool, CloudError> {
        let mut marker: Option<String> = None;
        loop {
            let out = self
                .api
                .call("DescribeLoadBalancers", || {
                    self.client
                        .describe_load_balancers()
                        .page_size(400)
                        .set_marker(marker.clone())
                        .send()
                })
                .await?;
            if out
                .load_balancers()
                .iter()
                .any(|l| l.security_groups().iter().any(|g| g == id))
            {
                return Ok(true);
            }
            marker = out.next_marker().map(str::to_string);
            if marker.is_none() {
                return Ok(false);
            }
        }
    }

    /// Creates the ALB.
    pub async fn create(&self, new: &NewAlb<'_>) -> Result<AlbState, CloudError> {
        let scheme = if new.internet_facing {
            LoadBalancerSchemeEnum::InternetFacing
        } else {
            LoadBalancerSchemeEnum::Internal
        };
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .name(new.name)
                    .r#type(LoadBalancerTypeEnum::Application)
                    .scheme(scheme.clone())
                    .ip_address_type(ip_address_type(new.dualstack))
                    .set_subnets(Some(new.subnets.to_vec()))
                    .set_security_groups(
                        Some(new.security_groups.to_vec()).filter(|s| !s.is_empty()),
                    )
                    .set_tags(Some(tags(new.tags)))
                    .send()
            })
            .await?;
        let l = out
            .load_balancers()
            .first()
            .ok_or_else(|| missing("CreateLoadBalancer"))?;
        Ok(AlbState::of(l))
    }

    /// Replaces the security groups of a load balancer.
    pub async fn set_security_groups(
        &self,
        arn: &str,
        groups: &[String],
    ) -> Result<(), CloudError> {
        self.api
            .call("SetSecurityGroups", || {
                self.client
                    .set_security_groups()
                    .load_balancer_arn(arn)
                    .set_security_groups(Some(groups.to_vec()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Switches a load balancer between `ipv4` and `dualstack`.
    pub async fn set_ip_address_type(&self, arn: &str, dualstack: bool) -> Result<(), CloudError> {
        self.api
            .call("SetIpAddressType", || {
                self.client
                    .set_ip_address_type()
                    .load_balancer_arn(arn)
                    .ip_address_type(ip_address_type(dualstack))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// The attributes of a load balancer.
    pub async fn attributes(&self, arn: &str) -> Result<BTreeMap<String, String>, CloudError> {
        let out = self
            .api
            .call("DescribeLoadBalancerAttributes", || {
                self.client
                    .describe_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await?;
        Ok(out
            .attributes()
            .iter()
            .filter_map(|a| Some((a.key()?.to_string(), a.value()?.to_string())))
            .collect())
    }

    /// Sets the given attributes of a load balancer (the others stay).
    pub async fn modify_attributes(
        &self,
        arn: &str,
        wanted: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let attrs: Vec<elbv2::types::LoadBalancerAttribute> = wanted
            .iter()
            .map(|(k, v)| {
                elbv2::types::LoadBalancerAttribute::builder()
                    .key(k)
                    .value(v)
                    .build()
            })
            .collect();
        self.api
            .call("ModifyLoadBalancerAttributes", || {
                self.client
                    .modify_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .set_attributes(Some(attrs.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Deletes a load balancer (listeners and rules go with it); gone counts as deleted.
    pub async fn delete(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteLoadBalancer", || {
                self.client
                    .delete_load_balancer()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The target group named `name`: its ARN.
    pub async fn target_group(&self, name: &str) -> Result<Option<String>, CloudError> {
        match self
            .api
            .call("DescribeTargetGroups", || {
                self.client.describe_target_groups().names(name).send()
            })
            .await
        {
            Ok(out) => Ok(out
                .target_groups()
                .first()
                .and_then(|g| g.target_group_arn())
                .map(str::to_string)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a backend target group (HTTP; targets carry their own ports).
    pub async fn create_target_group(
        &self,
        vpc: &str,
        tg: &TargetGroupSpec,
        wanted: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let new = NewTargetGroup {
            name: &tg.name,
            protocol: ProtocolEnum::Http,
            port: 80,
            ip: tg.ip,
            health: &tg.health,
        };
        self.create_target_group_of(vpc, &new, wanted).await
    }

    /// Creates a target group of any protocol (the health-check path only for HTTP(S) checks).
    pub async fn create_target_group_of(
        &self,
        vpc: &str,
        tg: &NewTargetGroup<'_>,
        wanted: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let h = tg.health;
        let http_check = h.protocol.starts_with("HTTP");
        let out = self
            .api
            .call("CreateTargetGroup", || {
                self.client
                    .create_target_group()
                    .name(tg.name)
                    .protocol(tg.protocol.clone())
                    .port(tg.port)
                    .vpc_id(vpc)
                    .target_type(if tg.ip {
                        TargetTypeEnum::Ip
                    } else {
                        TargetTypeEnum::Instance
                    })
                    .health_check_protocol(ProtocolEnum::from(h.protocol.as_str()))
                    .health_check_port(&h.port)
                    .set_health_check_path(Some(h.path.clone()).filter(|_| http_check))
                    .health_check_interval_seconds(h.interval)
                    .health_check_timeout_seconds(h.timeout)
                    .healthy_threshold_count(h.healthy)
                    .unhealthy_threshold_count(h.unhealthy)
                    .set_matcher(matcher(h))
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await?;
        out.target_groups()
            .first()
            .and_then(|g| g.target_group_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateTargetGroup"))
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

    /// Every target group of the account: (name, ARN), all pages.
    pub async fn all_target_groups(&self) -> Result<Vec<(String, String)>, CloudError> {
        Ok(self
            .all_target_groups_live()
            .await?
            .into_iter()
            .map(|g| (g.name, g.arn))
            .collect())
    }

    /// Every target group of the account with its health check, all pages.
    pub async fn all_target_groups_live(&self) -> Result<Vec<LiveTargetGroup>, CloudError> {
        let mut all = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let out = self
                .api
                .call("DescribeTargetGroups", || {
                    self.client
                        .describe_target_groups()
                        .page_size(400)
                        .set_marker(marker.clone())
                        .send()
                })
                .await?;
            all.extend(out.target_groups().iter().filter_map(|g| {
                Some(LiveTargetGroup {
                    name: g.target_group_name()?.to_string(),
                    arn: g.target_group_arn()?.to_string(),
                    health: live_health(g),
                })
            }));
            marker = out.next_marker().map(str::to_string);
            if marker.is_none() {
                return Ok(all);
            }
        }
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

    /// Sets the given attributes of a target group (the others stay).
    pub async fn modify_target_group_attributes(
        &self,
        arn: &str,
        wanted: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let attrs: Vec<elbv2::types::TargetGroupAttribute> = wanted
            .iter()
            .map(|(k, v)| {
                elbv2::types::TargetGroupAttribute::builder()
                    .key(k)
                    .value(v)
                    .build()
            })
            .collect();
        self.api
            .call("ModifyTargetGroupAttributes", || {
                self.client
                    .modify_target_group_attributes()
                    .target_group_arn(arn)
                    .set_attributes(Some(attrs.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Brings a target group's `wanted` attributes to their values: nothing when none is
    /// planned, else one read and one write of the differing ones (`fresh`: just created,
    /// nothing to read).
    pub async fn hold_target_group_attributes(
        &self,
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
            self.target_group_attributes(arn).await?
        };
        let set = crate::ingress::drift::differing(&live, wanted);
        if set.is_empty() {
            return Ok(());
        }
        self.modify_target_group_attributes(arn, &set).await
    }

    /// Makes a target group's health check the planned one.
    pub async fn modify_health(
        &self,
        arn: &str,
        h: &crate::ingress::annotations::HealthCheck,
    ) -> Result<(), CloudError> {
        let http_check = h.protocol.starts_with("HTTP");
        self.api
            .call("ModifyTargetGroup", || {
                self.client
                    .modify_target_group()
                    .target_group_arn(arn)
                    .health_check_protocol(ProtocolEnum::from(h.protocol.as_str()))
                    .health_check_port(&h.port)
                    .set_health_check_path(Some(h.path.clone()).filter(|_| http_check))
                    .health_check_interval_seconds(h.interval)
                    .health_check_timeout_seconds(h.timeout)
                    .healthy_threshold_count(h.healthy)
                    .unhealthy_threshold_count(h.unhealthy)
                    .set_matcher(matcher(h))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Target groups (name, ARN) whose tags carry every `(key, value)` of `selector`.
    pub async fn tagged_target_groups(
        &self,
        selector: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, CloudError> {
        let all = self.all_target_groups().await?;
        self.having_tags(&all, selector).await
    }

    /// Those of `groups` (name, ARN) whose tags carry every `(key, value)` of `selector`
    /// (DescribeTags, 20 ARNs per call).
    pub async fn having_tags(
        &self,
        groups: &[(String, String)],
        selector: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, CloudError> {
        let mut found = Vec::new();
        for chunk in groups.chunks(20) {
            let arns: Vec<String> = chunk.iter().map(|(_, a)| a.clone()).collect();
            let out = self
                .api
                .call("DescribeTags", || {
                    self.client
                        .describe_tags()
                        .set_resource_arns(Some(arns.clone()))
                        .send()
                })
                .await?;
            for d in out.tag_descriptions() {
                let have: BTreeMap<&str, &str> = d
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
                    .collect();
                if selector
                    .iter()
                    .all(|(k, v)| have.get(k.as_str()) == Some(&v.as_str()))
                {
                    if let Some(hit) = chunk
                        .iter()
                        .find(|(_, a)| Some(a.as_str()) == d.resource_arn())
                    {
                        found.push(hit.clone());
                    }
                }
            }
        }
        Ok(found)
    }
}

/// The HTTP codes matcher of an HTTP(S) check.
fn matcher(h: &crate::ingress::annotations::HealthCheck) -> Option<elbv2::types::Matcher> {
    h.protocol.starts_with("HTTP").then(|| {
        elbv2::types::Matcher::builder()
            .http_code(&h.success_codes)
            .build()
    })
}

/// A target group's health check as AWS has it (fields AWS leaves out read as the defaults).
fn live_health(g: &elbv2::types::TargetGroup) -> crate::ingress::annotations::HealthCheck {
    let d = crate::ingress::annotations::HealthCheck::default();
    crate::ingress::annotations::HealthCheck {
        path: g.health_check_path().map(str::to_string).unwrap_or(d.path),
        port: g.health_check_port().map(str::to_string).unwrap_or(d.port),
        protocol: g
            .health_check_protocol()
            .map(|p| p.as_str().to_string())
            .unwrap_or(d.protocol),
        interval: g.health_check_interval_seconds().unwrap_or(d.interval),
        timeout: g.health_check_timeout_seconds().unwrap_or(d.timeout),
        healthy: g.healthy_threshold_count().unwrap_or(d.healthy),
        unhealthy: g.unhealthy_threshold_count().unwrap_or(d.unhealthy),
        success_codes: g
            .matcher()
            .and_then(|m| m.http_code())
            .map(str::to_string)
            .unwrap_or(d.success_codes),
    }
}

fn ip_address_type(dualstack: bool) -> IpAddressType {
    if dualstack {
        IpAddressType::Dualstack
    } else {
        IpAddressType::Ipv4
    }
}
