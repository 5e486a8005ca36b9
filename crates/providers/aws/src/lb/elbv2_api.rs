//! The narrow seam over the ELBv2 API (NLBs, target groups and their targets): the calls Stratus makes.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    Action, ActionTypeEnum, Certificate, LoadBalancerSchemeEnum, LoadBalancerTypeEnum,
    ProtocolEnum, SubnetMapping, Tag, TargetDescription, TargetGroupAttribute, TargetTypeEnum,
};
use stratus_cloud::CloudError;

use crate::api_call::AwsApi;
use crate::lb::network_spec::{NetworkPort, TargetHealthCheck};

/// Most resources one DescribeTags call accepts.
pub const TAG_BATCH: usize = 20;

/// An NLB as AWS reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkLb {
    /// The load balancer's ARN.
    pub arn: String,
    /// Its name.
    pub name: String,
    /// Its DNS name (the ingress hostname).
    pub dns_name: String,
    /// Internal scheme.
    pub internal: bool,
    /// Its subnets.
    pub subnets: BTreeSet<String>,
}

/// A target group as AWS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupState {
    /// The target group's ARN.
    pub arn: String,
    /// Its name.
    pub name: String,
    /// Its health check.
    pub health_check: TargetHealthCheck,
}

/// A listener as AWS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerState {
    /// The listener's ARN.
    pub arn: String,
    /// Its port.
    pub port: i32,
    /// Its protocol.
    pub protocol: String,
    /// The target group it forwards to.
    pub target_group_arn: Option<String>,
    /// Its certificate ARN (TLS).
    pub certificate: Option<String>,
}

/// One registered target: an instance ID or an IP address, with its port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetRef {
    /// Instance ID (`instance` groups) or IP address (`ip` groups).
    pub id: String,
    /// The port traffic goes to.
    pub port: i32,
}

/// A registered target and its health state (`initial`, `healthy`, `unhealthy`, `draining`…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealthState {
    /// The target.
    pub target: TargetRef,
    /// AWS's health state, lower case.
    pub state: String,
}

/// What a target group is: its type and traffic port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupInfo {
    /// The target group's ARN.
    pub arn: String,
    /// `instance`, `ip` or `lambda`/`alb`.
    pub target_type: String,
    /// Its traffic port.
    pub port: Option<i32>,
    /// Its VPC.
    pub vpc_id: Option<String>,
    /// `ipv4` or `ipv6`, when AWS says.
    pub ip_address_type: Option<String>,
}

/// Most targets one RegisterTargets or DeregisterTargets call carries.
pub const TARGET_BATCH: usize = 200;

/// ELBv2 access.
#[derive(Debug, Clone)]
pub struct ElbV2Api {
    client: elbv2::Client,
    api: AwsApi,
}

fn is_code(e: &CloudError, wanted: &str) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == wanted)
}

fn tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

fn forward(target_group_arn: &str) -> Action {
    Action::builder()
        .r#type(ActionTypeEnum::Forward)
        .target_group_arn(target_group_arn)
        .build()
}

fn health_of(g: &elbv2::types::TargetGroup) -> TargetHealthCheck {
    TargetHealthCheck {
        protocol: g
            .health_check_protocol()
            .map_or("TCP".into(), |p| p.as_str().to_string()),
        port: g.health_check_port().unwrap_or("traffic-port").to_string(),
        path: g.health_check_path().map(str::to_string),
        interval: g.health_check_interval_seconds().unwrap_or(30),
        timeout: g.health_check_timeout_seconds().unwrap_or(10),
        healthy_threshold: g.healthy_threshold_count().unwrap_or(3),
        unhealthy_threshold: g.unhealthy_threshold_count().unwrap_or(3),
    }
}

impl ElbV2Api {
    /// Wraps an SDK client.
    pub fn new(client: elbv2::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// The load balancer named `name`, if it exists.
    pub async fn describe(&self, name: &str) -> Result<Option<NetworkLb>, CloudError> {
        let out = match self
            .api
            .call("DescribeLoadBalancers", || {
                self.client.describe_load_balancers().names(name).send()
            })
            .await
        {
            Ok(o) => o,
            Err(e) if is_code(&e, "LoadBalancerNotFound") => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(out.load_balancers().first().map(|l| NetworkLb {
            arn: l.load_balancer_arn().unwrap_or("").to_string(),
            name: l.load_balancer_name().unwrap_or("").to_string(),
            dns_name: l.dns_name().unwrap_or("").to_string(),
            internal: l.scheme() == Some(&LoadBalancerSchemeEnum::Internal),
            subnets: l
                .availability_zones()
                .iter()
                .filter_map(|z| z.subnet_id().map(str::to_string))
                .collect(),
        }))
    }

    /// Names and ARNs of every ELBv2 load balancer of the region (reaper only).
    pub async fn list_load_balancers(&self) -> Result<Vec<(String, String)>, CloudError> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = self
                .api
                .call("DescribeLoadBalancers", || {
                    self.client
                        .describe_load_balancers()
                        .set_marker(marker.clone())
                        .page_size(400)
                        .send()
                })
                .await?;
            out.extend(page.load_balancers().iter().filter_map(|l| {
                Some((
                    l.load_balancer_name()?.to_string(),
                    l.load_balancer_arn()?.to_string(),
                ))
            }));
            marker = page
                .next_marker()
                .filter(|m| !m.is_empty())
                .map(str::to_string);
            if marker.is_none() {
                return Ok(out);
            }
        }
    }

    /// ARNs of every target group of the region (reaper only).
    pub async fn list_target_groups(&self) -> Result<Vec<String>, CloudError> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = self
                .api
                .call("DescribeTargetGroups", || {
                    self.client
                        .describe_target_groups()
                        .set_marker(marker.clone())
                        .page_size(400)
                        .send()
                })
                .await?;
            out.extend(
                page.target_groups()
                    .iter()
                    .filter_map(|g| g.target_group_arn().map(str::to_string)),
            );
            marker = page
                .next_marker()
                .filter(|m| !m.is_empty())
                .map(str::to_string);
            if marker.is_none() {
                return Ok(out);
            }
        }
    }

    /// Tags of up to [`TAG_BATCH`] resources, by ARN.
    pub async fn tags(
        &self,
        arns: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, CloudError> {
        let out = self
            .api
            .call("DescribeTags", || {
                self.client
                    .describe_tags()
                    .set_resource_arns(Some(arns.to_vec()))
                    .send()
            })
            .await?;
        Ok(out
            .tag_descriptions()
            .iter()
            .filter_map(|d| {
                let t = d
                    .tags()
                    .iter()
                    .filter_map(|t| {
                        Some((t.key()?.to_string(), t.value().unwrap_or("").to_string()))
                    })
                    .collect();
                Some((d.resource_arn()?.to_string(), t))
            })
            .collect())
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

    /// Creates the NLB; subnet mappings carry EIP allocations or private addresses when given.
    pub async fn create(
        &self,
        name: &str,
        internal: bool,
        mappings: &[(String, Option<String>, Option<String>)],
        wanted: &BTreeMap<String, String>,
    ) -> Result<NetworkLb, CloudError> {
        let mappings: Vec<SubnetMapping> = mappings
            .iter()
            .map(|(subnet, eip, ip)| {
                SubnetMapping::builder()
                    .subnet_id(subnet)
                    .set_allocation_id(eip.clone())
                    .set_private_ipv4_address(ip.clone())
                    .build()
            })
            .collect();
        let scheme = if internal {
            LoadBalancerSchemeEnum::Internal
        } else {
            LoadBalancerSchemeEnum::InternetFacing
        };
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .name(name)
                    .r#type(LoadBalancerTypeEnum::Network)
                    .scheme(scheme.clone())
                    .set_subnet_mappings(Some(mappings.clone()))
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await?;
        let l = out
            .load_balancers()
            .first()
            .ok_or_else(|| CloudError::Unavailable {
                operation: "CreateLoadBalancer".into(),
                message: "no load balancer in the answer".into(),
            })?;
        Ok(NetworkLb {
            arn: l.load_balancer_arn().unwrap_or("").to_string(),
            name: name.to_string(),
            dns_name: l.dns_name().unwrap_or("").to_string(),
            internal,
            subnets: mappings
                .iter()
                .filter_map(|m| m.subnet_id().map(str::to_string))
                .collect(),
        })
    }

    /// Deletes a load balancer (its listeners go with it); gone counts as deleted.
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
            Err(e) if is_code(&e, "LoadBalancerNotFound") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Listeners of a load balancer.
    pub async fn listeners(&self, lb_arn: &str) -> Result<Vec<ListenerState>, CloudError> {
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
            .map(|l| ListenerState {
                arn: l.listener_arn().unwrap_or("").to_string(),
                port: l.port().unwrap_or(0),
                protocol: l
                    .protocol()
                    .map_or(String::new(), |p| p.as_str().to_string()),
                target_group_arn: l
                    .default_actions()
                    .iter()
                    .find_map(|a| a.target_group_arn().map(str::to_string)),
                certificate: l
                    .certificates()
                    .iter()
                    .find_map(|c| c.certificate_arn().map(str::to_string)),
            })
            .collect())
    }

    /// Creates a listener forwarding to a target group.
    pub async fn create_listener(
        &self,
        lb_arn: &str,
        port: &NetworkPort,
        target_group_arn: &str,
    ) -> Result<(), CloudError> {
        let certs = port
            .certificate
            .as_ref()
            .map(|c| vec![Certificate::builder().certificate_arn(c).build()]);
        self.api
            .call("CreateListener", || {
                self.client
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .port(port.port)
                    .protocol(ProtocolEnum::from(port.protocol.as_str()))
                    .set_certificates(certs.clone())
                    .set_ssl_policy(port.ssl_policy.clone())
                    .default_actions(forward(target_group_arn))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Re-points a listener (protocol, certificate and target group).
    pub async fn modify_listener(
        &self,
        listener_arn: &str,
        port: &NetworkPort,
        target_group_arn: &str,
    ) -> Result<(), CloudError> {
        let certs = port
            .certificate
            .as_ref()
            .map(|c| vec![Certificate::builder().certificate_arn(c).build()]);
        self.api
            .call("ModifyListener", || {
                self.client
                    .modify_listener()
                    .listener_arn(listener_arn)
                    .protocol(ProtocolEnum::from(port.protocol.as_str()))
                    .set_certificates(certs.clone())
                    .default_actions(forward(target_group_arn))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Deletes a listener.
    pub async fn delete_listener(&self, listener_arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteListener", || {
                self.client
                    .delete_listener()
                    .listener_arn(listener_arn)
                    .send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, "ListenerNotFound") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The target group named `name`, if it exists.
    pub async fn target_group(&self, name: &str) -> Result<Option<TargetGroupState>, CloudError> {
        let out = match self
            .api
            .call("DescribeTargetGroups", || {
                self.client.describe_target_groups().names(name).send()
            })
            .await
        {
            Ok(o) => o,
            Err(e) if is_code(&e, "TargetGroupNotFound") => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(out.target_groups().first().map(|g| TargetGroupState {
            arn: g.target_group_arn().unwrap_or("").to_string(),
            name: g.target_group_name().unwrap_or("").to_string(),
            health_check: health_of(g),
        }))
    }

    /// Target groups attached to a load balancer (none when it has no listener yet: e.g. its
    /// creator was killed between CreateLoadBalancer and CreateListener).
    pub async fn target_groups_of(
        &self,
        lb_arn: &str,
    ) -> Result<Vec<TargetGroupState>, CloudError> {
        let out = match self
            .api
            .call("DescribeTargetGroups", || {
                self.client
                    .describe_target_groups()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await
        {
            Ok(out) => out,
            // AWS answers an empty list; moto (and older endpoints) this error.
            Err(e) if is_code(&e, "TargetGroupNotFound") => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(out
            .target_groups()
            .iter()
            .map(|g| TargetGroupState {
                arn: g.target_group_arn().unwrap_or("").to_string(),
                name: g.target_group_name().unwrap_or("").to_string(),
                health_check: health_of(g),
            })
            .collect())
    }

    /// Creates an instance target group.
    pub async fn create_target_group(
        &self,
        vpc: &str,
        port: &NetworkPort,
        hc: &TargetHealthCheck,
        wanted: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let out = self
            .api
            .call("CreateTargetGroup", || {
                self.client
                    .create_target_group()
                    .name(&port.target_group)
                    .protocol(ProtocolEnum::from(port.target_protocol.as_str()))
                    .port(port.node_port)
                    .vpc_id(vpc)
                    .target_type(TargetTypeEnum::Instance)
                    .health_check_protocol(ProtocolEnum::from(hc.protocol.as_str()))
                    .health_check_port(&hc.port)
                    .set_health_check_path(hc.path.clone())
                    .health_check_interval_seconds(hc.interval)
                    .health_check_timeout_seconds(hc.timeout)
                    .healthy_threshold_count(hc.healthy_threshold)
                    .unhealthy_threshold_count(hc.unhealthy_threshold)
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await?;
        Ok(out
            .target_groups()
            .first()
            .and_then(|g| g.target_group_arn())
            .unwrap_or("")
            .to_string())
    }

    /// Rewrites a target group's health check.
    pub async fn modify_health_check(
        &self,
        arn: &str,
        hc: &TargetHealthCheck,
    ) -> Result<(), CloudError> {
        self.api
            .call("ModifyTargetGroup", || {
                self.client
                    .modify_target_group()
                    .target_group_arn(arn)
                    .health_check_protocol(ProtocolEnum::from(hc.protocol.as_str()))
                    .health_check_port(&hc.port)
                    .set_health_check_path(hc.path.clone())
                    .health_check_interval_seconds(hc.interval)
                    .health_check_timeout_seconds(hc.timeout)
                    .healthy_threshold_count(hc.healthy_threshold)
                    .unhealthy_threshold_count(hc.unhealthy_threshold)
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Sets target-group attributes.
    pub async fn set_target_group_attributes(
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
            Err(e) if is_code(&e, "TargetGroupNotFound") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Instance IDs registered in a target group.
    pub async fn targets(&self, arn: &str) -> Result<BTreeSet<String>, CloudError> {
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
            .filter_map(|d| d.target().and_then(|t| t.id()).map(str::to_string))
            .collect())
    }

    /// Registers instances on `port`.
    pub async fn register(&self, arn: &str, ids: &[String], port: i32) -> Result<(), CloudError> {
        if ids.is_empty() {
            return Ok(());
        }
        let targets: Vec<TargetDescription> = ids
            .iter()
            .map(|id| TargetDescription::builder().id(id).port(port).build())
            .collect();
        self.api
            .call("RegisterTargets", || {
                self.client
                    .register_targets()
                    .target_group_arn(arn)
                    .set_targets(Some(targets.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// A target group by ARN (None when it does not exist).
    pub async fn target_group_info(
        &self,
        arn: &str,
    ) -> Result<Option<TargetGroupInfo>, CloudError> {
        let out = match self
            .api
            .call("DescribeTargetGroups", || {
                self.client
                    .describe_target_groups()
                    .target_group_arns(arn)
                    .send()
            })
            .await
        {
            Ok(o) => o,
            Err(e) if is_code(&e, "TargetGroupNotFound") => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(out.target_groups().first().map(|g| TargetGroupInfo {
            arn: g.target_group_arn().unwrap_or(arn).to_string(),
            target_type: g
                .target_type()
                .map_or("instance".into(), |t| t.as_str().to_string()),
            port: g.port(),
            vpc_id: g.vpc_id().map(str::to_string),
            ip_address_type: g.ip_address_type().map(|t| t.as_str().to_string()),
        }))
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

    /// Registers targets, [`TARGET_BATCH`] per call.
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

    /// Deregisters targets, [`TARGET_BATCH`] per call.
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

    /// Deregisters instances on `port`.
    pub async fn deregister(&self, arn: &str, ids: &[String], port: i32) -> Result<(), CloudError> {
        if ids.is_empty() {
            return Ok(());
        }
        let targets: Vec<TargetDescription> = ids
            .iter()
            .map(|id| TargetDescription::builder().id(id).port(port).build())
            .collect();
        self.api
            .call("DeregisterTargets", || {
                self.client
                    .deregister_targets()
                    .target_group_arn(arn)
                    .set_targets(Some(targets.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }
}

fn descriptions(targets: &[TargetRef]) -> Vec<TargetDescription> {
    targets
        .iter()
        .map(|t| TargetDescription::builder().id(&t.id).port(t.port).build())
        .collect()
}
