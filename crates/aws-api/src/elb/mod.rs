//! The one Classic ELB client: the calls Stratus makes (load balancers, listeners, health
//! checks, attributes, policies, instances, tags), through the shared call guard, paging
//! inside, in AWS-shaped values ([`values`]).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancing as elb;
use elb::types::{
    AccessLog, ConnectionDraining, ConnectionSettings, CrossZoneLoadBalancing, Instance, Listener,
    LoadBalancerAttributes, PolicyAttribute, Tag,
};
use stratus_cloud::CloudError;

use crate::call::AwsApi;
use crate::pager::pages;

pub mod values;

pub use values::{
    AccessLogSettings, ClassicAttributes, ClassicListener, HealthCheck, PROXY_PROTOCOL_POLICY,
};

/// Most names one DescribeTags call accepts.
pub const TAG_BATCH: usize = 20;
/// Most instances one register/deregister call carries.
pub const INSTANCE_BATCH: usize = 100;

/// A Classic ELB as AWS reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassicLb {
    /// The ELB name.
    pub name: String,
    /// Its DNS name (the ingress hostname).
    pub dns_name: String,
    /// `internet-facing` or `internal`.
    pub scheme: String,
    /// Its VPC.
    pub vpc_id: String,
    /// Its listeners.
    pub listeners: BTreeSet<ClassicListener>,
    /// Its subnets.
    pub subnets: BTreeSet<String>,
    /// Its security groups.
    pub security_groups: Vec<String>,
    /// Registered instance IDs.
    pub instances: BTreeSet<String>,
    /// Its health check.
    pub health_check: Option<HealthCheck>,
    /// Instance ports with the PROXY protocol policy.
    pub proxy_ports: BTreeSet<i32>,
    /// Policies of each listener, by load-balancer port.
    pub listener_policies: BTreeMap<i32, Vec<String>>,
}

/// Classic ELB access.
#[derive(Debug, Clone)]
pub struct ElbApi {
    client: elb::Client,
    api: AwsApi,
}

fn invalid(what: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidInput(format!("{what}: {e}"))
}

fn listener_from(d: &elb::types::ListenerDescription) -> Option<ClassicListener> {
    let l = d.listener()?;
    Some(ClassicListener {
        port: l.load_balancer_port(),
        protocol: l.protocol().to_ascii_uppercase(),
        instance_port: l.instance_port(),
        instance_protocol: l
            .instance_protocol()
            .unwrap_or(l.protocol())
            .to_ascii_uppercase(),
        certificate: l.ssl_certificate_id().map(str::to_string),
    })
}

fn to_listener(l: &ClassicListener) -> Result<Listener, CloudError> {
    Listener::builder()
        .protocol(&l.protocol)
        .load_balancer_port(l.port)
        .instance_protocol(&l.instance_protocol)
        .instance_port(l.instance_port)
        .set_ssl_certificate_id(l.certificate.clone())
        .build()
        .map_err(|e| invalid("listener", e))
}

fn to_tags(tags: &BTreeMap<String, String>) -> Result<Vec<Tag>, CloudError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| invalid("tag", e))
        })
        .collect()
}

fn instances(ids: &[String]) -> Vec<Instance> {
    ids.iter()
        .map(|id| Instance::builder().instance_id(id).build())
        .collect()
}

fn not_found(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == "LoadBalancerNotFound")
}

impl ElbApi {
    /// Wraps an SDK client.
    pub fn new(client: elb::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// The load balancer named `name`, if it exists.
    pub async fn describe(&self, name: &str) -> Result<Option<ClassicLb>, CloudError> {
        let out = self
            .api
            .call("DescribeLoadBalancers", || {
                self.client
                    .describe_load_balancers()
                    .load_balancer_names(name)
                    .send()
            })
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(d) = out.load_balancer_descriptions().first() else {
            return Ok(None);
        };
        let proxy_ports = d
            .backend_server_descriptions()
            .iter()
            .filter(|b| b.policy_names().iter().any(|p| p == PROXY_PROTOCOL_POLICY))
            .filter_map(|b| b.instance_port())
            .collect();
        Ok(Some(ClassicLb {
            name: d.load_balancer_name().unwrap_or("").to_string(),
            dns_name: d.dns_name().unwrap_or("").to_string(),
            scheme: d.scheme().unwrap_or("").to_string(),
            vpc_id: d.vpc_id().unwrap_or("").to_string(),
            listeners: d
                .listener_descriptions()
                .iter()
                .filter_map(listener_from)
                .collect(),
            subnets: d.subnets().iter().cloned().collect(),
            security_groups: d.security_groups().to_vec(),
            instances: d
                .instances()
                .iter()
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect(),
            listener_policies: d
                .listener_descriptions()
                .iter()
                .filter_map(|l| {
                    Some((
                        l.listener()?.load_balancer_port(),
                        l.policy_names().to_vec(),
                    ))
                })
                .collect(),
            health_check: d.health_check().map(|h| HealthCheck {
                target: h.target().to_string(),
                healthy_threshold: h.healthy_threshold(),
                unhealthy_threshold: h.unhealthy_threshold(),
                timeout: h.timeout(),
                interval: h.interval(),
            }),
            proxy_ports,
        }))
    }

    /// Names of every load balancer of the account and region (for the reaper only).
    pub async fn list_names(&self) -> Result<Vec<String>, CloudError> {
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeLoadBalancers",
            |marker| {
                self.client
                    .describe_load_balancers()
                    .set_marker(marker)
                    .page_size(400)
                    .send()
            },
            |page| {
                out.extend(
                    page.load_balancer_descriptions()
                        .iter()
                        .filter_map(|d| d.load_balancer_name().map(str::to_string)),
                );
                page.next_marker().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }

    /// Tags of up to [`TAG_BATCH`] load balancers.
    pub async fn tags(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, CloudError> {
        let out = self
            .api
            .call("DescribeTags", || {
                self.client
                    .describe_tags()
                    .set_load_balancer_names(Some(names.to_vec()))
                    .send()
            })
            .await?;
        Ok(out
            .tag_descriptions()
            .iter()
            .filter_map(|d| {
                let tags = d
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().unwrap_or("").to_string()))
                    .collect();
                Some((d.load_balancer_name()?.to_string(), tags))
            })
            .collect())
    }

    /// Creates the load balancer; returns its DNS name.
    pub async fn create(
        &self,
        name: &str,
        internal: bool,
        listeners: &BTreeSet<ClassicListener>,
        subnets: &[String],
        security_groups: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let listeners = listeners
            .iter()
            .map(to_listener)
            .collect::<Result<Vec<_>, _>>()?;
        let tags = to_tags(tags)?;
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .load_balancer_name(name)
                    .set_listeners(Some(listeners.clone()))
                    .set_subnets(Some(subnets.to_vec()))
                    .set_security_groups(Some(security_groups.to_vec()))
                    .set_scheme(internal.then(|| "internal".to_string()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(out.dns_name().unwrap_or("").to_string())
    }

    /// Deletes the load balancer; gone already counts as deleted.
    pub async fn delete(&self, name: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteLoadBalancer", || {
                self.client
                    .delete_load_balancer()
                    .load_balancer_name(name)
                    .send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Adds listeners.
    pub async fn create_listeners(
        &self,
        name: &str,
        listeners: &[ClassicListener],
    ) -> Result<(), CloudError> {
        let listeners = listeners
            .iter()
            .map(to_listener)
            .collect::<Result<Vec<_>, _>>()?;
        self.api
            .call("CreateLoadBalancerListeners", || {
                self.client
                    .create_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_listeners(Some(listeners.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Removes the listeners on `ports`.
    pub async fn delete_listeners(&self, name: &str, ports: &[i32]) -> Result<(), CloudError> {
        self.api
            .call("DeleteLoadBalancerListeners", || {
                self.client
                    .delete_load_balancer_listeners()
                    .load_balancer_name(name)
                    .set_load_balancer_ports(Some(ports.to_vec()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Sets the health check.
    pub async fn configure_health_check(
        &self,
        name: &str,
        hc: &HealthCheck,
    ) -> Result<(), CloudError> {
        let check = elb::types::HealthCheck::builder()
            .target(&hc.target)
            .healthy_threshold(hc.healthy_threshold)
            .unhealthy_threshold(hc.unhealthy_threshold)
            .timeout(hc.timeout)
            .interval(hc.interval)
            .build()
            .map_err(|e| invalid("health check", e))?;
        self.api
            .call("ConfigureHealthCheck", || {
                self.client
                    .configure_health_check()
                    .load_balancer_name(name)
                    .health_check(check.clone())
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// The attributes Stratus manages.
    pub async fn attributes(&self, name: &str) -> Result<ClassicAttributes, CloudError> {
        let out = self
            .api
            .call("DescribeLoadBalancerAttributes", || {
                self.client
                    .describe_load_balancer_attributes()
                    .load_balancer_name(name)
                    .send()
            })
            .await?;
        let a = out.load_balancer_attributes();
        let draining = a.and_then(|a| a.connection_draining());
        let log = a.and_then(|a| a.access_log()).filter(|l| l.enabled());
        Ok(ClassicAttributes {
            cross_zone: a
                .and_then(|a| a.cross_zone_load_balancing())
                .is_some_and(|c| c.enabled()),
            draining: draining
                .filter(|d| d.enabled())
                .map(|d| d.timeout().unwrap_or(300)),
            idle_timeout: a
                .and_then(|a| a.connection_settings())
                .map_or(60, |c| c.idle_timeout()),
            access_log: log.map(|l| AccessLogSettings {
                interval: l.emit_interval().unwrap_or(60),
                bucket: l.s3_bucket_name().unwrap_or("").to_string(),
                prefix: l.s3_bucket_prefix().unwrap_or("").to_string(),
            }),
        })
    }

    /// Writes the attributes Stratus manages.
    pub async fn set_attributes(
        &self,
        name: &str,
        want: &ClassicAttributes,
    ) -> Result<(), CloudError> {
        let log = match &want.access_log {
            Some(l) => AccessLog::builder()
                .enabled(true)
                .emit_interval(l.interval)
                .s3_bucket_name(&l.bucket)
                .s3_bucket_prefix(&l.prefix)
                .build(),
            None => AccessLog::builder().enabled(false).build(),
        };
        let attrs = LoadBalancerAttributes::builder()
            .cross_zone_load_balancing(
                CrossZoneLoadBalancing::builder()
                    .enabled(want.cross_zone)
                    .build(),
            )
            .connection_draining(
                ConnectionDraining::builder()
                    .enabled(want.draining.is_some())
                    .set_timeout(want.draining)
                    .build(),
            )
            .connection_settings(
                ConnectionSettings::builder()
                    .idle_timeout(want.idle_timeout)
                    .build()
                    .map_err(|e| invalid("connection settings", e))?,
            )
            .access_log(log)
            .build();
        self.api
            .call("ModifyLoadBalancerAttributes", || {
                self.client
                    .modify_load_balancer_attributes()
                    .load_balancer_name(name)
                    .load_balancer_attributes(attrs.clone())
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Registers instances, [`INSTANCE_BATCH`] per call.
    pub async fn register(&self, name: &str, ids: &[String]) -> Result<(), CloudError> {
        for chunk in ids.chunks(INSTANCE_BATCH) {
            self.api
                .call("RegisterInstancesWithLoadBalancer", || {
                    self.client
                        .register_instances_with_load_balancer()
                        .load_balancer_name(name)
                        .set_instances(Some(instances(chunk)))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Deregisters instances, [`INSTANCE_BATCH`] per call.
    pub async fn deregister(&self, name: &str, ids: &[String]) -> Result<(), CloudError> {
        for chunk in ids.chunks(INSTANCE_BATCH) {
            self.api
                .call("DeregisterInstancesFromLoadBalancer", || {
                    self.client
                        .deregister_instances_from_load_balancer()
                        .load_balancer_name(name)
                        .set_instances(Some(instances(chunk)))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Replaces the security groups.
    pub async fn apply_security_groups(
        &self,
        name: &str,
        groups: &[String],
    ) -> Result<(), CloudError> {
        self.api
            .call("ApplySecurityGroupsToLoadBalancer", || {
                self.client
                    .apply_security_groups_to_load_balancer()
                    .load_balancer_name(name)
                    .set_security_groups(Some(groups.to_vec()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Attaches and detaches subnets.
    pub async fn update_subnets(
        &self,
        name: &str,
        attach: &[String],
        detach: &[String],
    ) -> Result<(), CloudError> {
        if !attach.is_empty() {
            self.api
                .call("AttachLoadBalancerToSubnets", || {
                    self.client
                        .attach_load_balancer_to_subnets()
                        .load_balancer_name(name)
                        .set_subnets(Some(attach.to_vec()))
                        .send()
                })
                .await?;
        }
        if !detach.is_empty() {
            self.api
                .call("DetachLoadBalancerFromSubnets", || {
                    self.client
                        .detach_load_balancer_from_subnets()
                        .load_balancer_name(name)
                        .set_subnets(Some(detach.to_vec()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Adds or overwrites tags.
    pub async fn add_tags(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let tags = to_tags(tags)?;
        self.api
            .call("AddTags", || {
                self.client
                    .add_tags()
                    .load_balancer_names(name)
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Creates the PROXY protocol policy (idempotent: an existing one is fine).
    pub async fn ensure_proxy_policy(&self, name: &str) -> Result<(), CloudError> {
        let attr = PolicyAttribute::builder()
            .attribute_name("ProxyProtocol")
            .attribute_value("true")
            .build();
        let r = self
            .api
            .call("CreateLoadBalancerPolicy", || {
                self.client
                    .create_load_balancer_policy()
                    .load_balancer_name(name)
                    .policy_name(PROXY_PROTOCOL_POLICY)
                    .policy_type_name("ProxyProtocolPolicyType")
                    .policy_attributes(attr.clone())
                    .send()
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(CloudError::Rejected { code, .. }) if code == "DuplicatePolicyName" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates a listener policy referencing a predefined SSL negotiation policy (idempotent).
    pub async fn ensure_ssl_policy(
        &self,
        name: &str,
        policy: &str,
        predefined: &str,
    ) -> Result<(), CloudError> {
        let attr = PolicyAttribute::builder()
            .attribute_name("Reference-Security-Policy")
            .attribute_value(predefined)
            .build();
        let r = self
            .api
            .call("CreateLoadBalancerPolicy", || {
                self.client
                    .create_load_balancer_policy()
                    .load_balancer_name(name)
                    .policy_name(policy)
                    .policy_type_name("SSLNegotiationPolicyType")
                    .policy_attributes(attr.clone())
                    .send()
            })
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(CloudError::Rejected { code, .. }) if code == "DuplicatePolicyName" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Sets the policies of the listener on `port`.
    pub async fn set_listener_policies(
        &self,
        name: &str,
        port: i32,
        policies: &[String],
    ) -> Result<(), CloudError> {
        self.api
            .call("SetLoadBalancerPoliciesOfListener", || {
                self.client
                    .set_load_balancer_policies_of_listener()
                    .load_balancer_name(name)
                    .load_balancer_port(port)
                    .set_policy_names(Some(policies.to_vec()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// Sets the backend policies of one instance port (empty turns PROXY protocol off).
    pub async fn set_backend_policies(
        &self,
        name: &str,
        instance_port: i32,
        policies: &[String],
    ) -> Result<(), CloudError> {
        self.api
            .call("SetLoadBalancerPoliciesForBackendServer", || {
                self.client
                    .set_load_balancer_policies_for_backend_server()
                    .load_balancer_name(name)
                    .instance_port(instance_port)
                    .set_policy_names(Some(policies.to_vec()))
                    .send()
            })
            .await
            .map(|_| ())
    }
}
