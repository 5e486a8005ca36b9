//! The ELBv2 calls of the Ingress driver (application load balancers, listeners, ordered rules,
//! backend target groups), each through the shared AWS call guard.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    Action, ActionTypeEnum, FixedResponseActionConfig, IpAddressType, LoadBalancerSchemeEnum,
    LoadBalancerTypeEnum, ProtocolEnum, RuleCondition, Tag, TargetTypeEnum,
};
use stratus_aws::api_call::AwsApi;
use stratus_cloud::CloudError;

use crate::ingress::model::{ListenerSpec, RuleSpec, TargetGroupSpec};

/// An existing application load balancer.
#[derive(Debug, Clone)]
pub struct AlbState {
    /// ARN.
    pub arn: String,
    /// DNS name (the Ingress hostname).
    pub dns_name: String,
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
            Ok(out) => Ok(out.load_balancers().first().map(|l| AlbState {
                arn: l.load_balancer_arn().unwrap_or_default().to_string(),
                dns_name: l.dns_name().unwrap_or_default().to_string(),
            })),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the ALB.
    pub async fn create(
        &self,
        name: &str,
        internet_facing: bool,
        subnets: &[String],
        security_groups: &[String],
        wanted: &BTreeMap<String, String>,
    ) -> Result<AlbState, CloudError> {
        let scheme = if internet_facing {
            LoadBalancerSchemeEnum::InternetFacing
        } else {
            LoadBalancerSchemeEnum::Internal
        };
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .name(name)
                    .r#type(LoadBalancerTypeEnum::Application)
                    .scheme(scheme.clone())
                    .ip_address_type(IpAddressType::Ipv4)
                    .set_subnets(Some(subnets.to_vec()))
                    .set_security_groups(Some(security_groups.to_vec()).filter(|s| !s.is_empty()))
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await?;
        let l = out
            .load_balancers()
            .first()
            .ok_or_else(|| missing("CreateLoadBalancer"))?;
        Ok(AlbState {
            arn: l.load_balancer_arn().unwrap_or_default().to_string(),
            dns_name: l.dns_name().unwrap_or_default().to_string(),
        })
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

    /// Listener ARNs by port.
    pub async fn listeners(&self, lb_arn: &str) -> Result<BTreeMap<i32, String>, CloudError> {
        let out = self
            .api
            .call("DescribeListeners", || {
                self.client
                    .describe_listeners()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await?;
        Ok(out
            .listeners()
            .iter()
            .filter_map(|l| Some((l.port()?, l.listener_arn()?.to_string())))
            .collect())
    }

    /// Creates a listener: a 404 fixed response, or a redirect to HTTPS, by default.
    pub async fn create_listener(
        &self,
        lb_arn: &str,
        l: &ListenerSpec,
    ) -> Result<String, CloudError> {
        let default = match l.redirect_to {
            Some(port) => Action::builder()
                .r#type(ActionTypeEnum::Redirect)
                .redirect_config(
                    elbv2::types::RedirectActionConfig::builder()
                        .protocol("HTTPS")
                        .port(port.to_string())
                        .status_code(elbv2::types::RedirectActionStatusCodeEnum::Http301)
                        .build(),
                )
                .build(),
            None => Action::builder()
                .r#type(ActionTypeEnum::FixedResponse)
                .fixed_response_config(
                    FixedResponseActionConfig::builder()
                        .status_code("404")
                        .content_type("text/plain")
                        .build(),
                )
                .build(),
        };
        let certs: Vec<elbv2::types::Certificate> = l
            .certificates
            .iter()
            .map(|c| {
                elbv2::types::Certificate::builder()
                    .certificate_arn(c)
                    .build()
            })
            .collect();
        let out = self
            .api
            .call("CreateListener", || {
                self.client
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .port(l.port.port)
                    .protocol(if l.port.https {
                        ProtocolEnum::Https
                    } else {
                        ProtocolEnum::Http
                    })
                    .set_certificates(Some(certs.clone()).filter(|c| !c.is_empty()))
                    .default_actions(default.clone())
                    .send()
            })
            .await?;
        out.listeners()
            .first()
            .and_then(|l| l.listener_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateListener"))
    }

    /// Deletes a listener (its rules go with it).
    pub async fn delete_listener(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteListener", || {
                self.client.delete_listener().listener_arn(arn).send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The listener's non-default rules: (ARN, priority, hosts, paths, target group ARN).
    pub async fn rules(&self, listener_arn: &str) -> Result<Vec<LiveRule>, CloudError> {
        let out = self
            .api
            .call("DescribeRules", || {
                self.client
                    .describe_rules()
                    .listener_arn(listener_arn)
                    .send()
            })
            .await?;
        Ok(out
            .rules()
            .iter()
            .filter(|r| !r.is_default().unwrap_or(false))
            .map(|r| {
                let mut hosts = Vec::new();
                let mut paths = Vec::new();
                for c in r.conditions() {
                    let (h, p) = condition_values(c);
                    hosts.extend(h);
                    paths.extend(p);
                }
                LiveRule {
                    arn: r.rule_arn().unwrap_or_default().to_string(),
                    priority: r.priority().and_then(|p| p.parse().ok()).unwrap_or(0),
                    hosts,
                    paths,
                    target_group: r
                        .actions()
                        .first()
                        .and_then(|a| a.target_group_arn())
                        .unwrap_or_default()
                        .to_string(),
                }
            })
            .collect())
    }

    /// Creates one rule forwarding to `tg_arn`; its ARN.
    pub async fn create_rule(
        &self,
        listener_arn: &str,
        rule: &RuleSpec,
        tg_arn: &str,
    ) -> Result<String, CloudError> {
        let mut conditions = Vec::new();
        if !rule.hosts.is_empty() {
            conditions.push(
                RuleCondition::builder()
                    .field("host-header")
                    .host_header_config(
                        elbv2::types::HostHeaderConditionConfig::builder()
                            .set_values(Some(rule.hosts.clone()))
                            .build(),
                    )
                    .build(),
            );
        }
        if !rule.paths.is_empty() {
            conditions.push(
                RuleCondition::builder()
                    .field("path-pattern")
                    .path_pattern_config(
                        elbv2::types::PathPatternConditionConfig::builder()
                            .set_values(Some(rule.paths.clone()))
                            .build(),
                    )
                    .build(),
            );
        }
        let action = Action::builder()
            .r#type(ActionTypeEnum::Forward)
            .target_group_arn(tg_arn)
            .build();
        let out = self
            .api
            .call("CreateRule", || {
                self.client
                    .create_rule()
                    .listener_arn(listener_arn)
                    .priority(rule.priority)
                    .set_conditions(Some(conditions.clone()))
                    .actions(action.clone())
                    .send()
            })
            .await?;
        out.rules()
            .first()
            .and_then(|r| r.rule_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateRule"))
    }

    /// Every target group of the account: (name, ARN), all pages.
    pub async fn all_target_groups(&self) -> Result<Vec<(String, String)>, CloudError> {
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
                Some((
                    g.target_group_name()?.to_string(),
                    g.target_group_arn()?.to_string(),
                ))
            }));
            marker = out.next_marker().map(str::to_string);
            if marker.is_none() {
                return Ok(all);
            }
        }
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

    /// Deletes one rule.
    pub async fn delete_rule(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteRule", || {
                self.client.delete_rule().rule_arn(arn).send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// A rule as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRule {
    /// ARN.
    pub arn: String,
    /// Priority.
    pub priority: i32,
    /// Host headers.
    pub hosts: Vec<String>,
    /// Path patterns.
    pub paths: Vec<String>,
    /// Forward target group ARN.
    pub target_group: String,
}

/// Host and path values of a condition (the `*Config` form, else the legacy `Values`).
pub fn condition_values(c: &RuleCondition) -> (Vec<String>, Vec<String>) {
    let legacy = c.values().to_vec();
    match c.field() {
        Some("host-header") => (
            c.host_header_config()
                .map(|h| h.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
            Vec::new(),
        ),
        Some("path-pattern") => (
            Vec::new(),
            c.path_pattern_config()
                .map(|p| p.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
        ),
        _ => (Vec::new(), Vec::new()),
    }
}
