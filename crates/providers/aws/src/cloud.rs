//! The AWS cloud: the provider factory (config file checked before anything else), the SDK
//! clients built from the cloud config, and the capabilities wired over them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use futures::FutureExt;
use prometheus_client::registry::Registry;
use stratus_cloud::{
    Capability, Cloud, ConfiguredProvider, InstancesV2, LoadBalancer, NodeTags, Provider,
    ProviderError, ProviderOptions, ReadinessGate, Routes, Unsupported,
};
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};

use stratus_aws_api::{AwsApi, Ec2, ElbApi, ElbV2Api};

use crate::config::CloudConfig;
use crate::instance_cache::{CacheOptions, InstanceCache, Scope};
use crate::instances_v2::AwsInstances;
use crate::lb::{AwsLoadBalancers, LbSettings};
use crate::node_tags::AwsNodeTags;
use crate::routes::{AwsRoutes, TableScope};
use crate::topology::{self, Topology};
use crate::zones::ZoneIds;

/// Provider name for `--cloud-provider`.
pub const PROVIDER_NAME: &str = "aws";

/// The AWS provider, as the binaries register it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AwsProvider;

impl Provider for AwsProvider {
    fn name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn configure(
        &self,
        options: &ProviderOptions,
    ) -> Result<Box<dyn ConfiguredProvider>, ProviderError> {
        let config = match &options.config_path {
            Some(path) => CloudConfig::load(path).map_err(|e| {
                ProviderError::Config(format!("--cloud-config {}: {e}", path.display()))
            })?,
            None => CloudConfig::default(),
        };
        // A config that cannot scope the cloud is refused before any API is touched: by
        // `missing` (with the region, so that both are named at once), else by `start`.
        Ok(Box::new(ConfiguredAws {
            config,
            options: AwsOptions {
                allow_untagged_cloud: options.allow_untagged_cloud,
                cache: CacheOptions::with_refresh_period(options.cache_refresh_period),
            },
            region: None,
        }))
    }
}

/// How the cloud-controller-manager takes a region, for the message when it has none.
const HOW_TO_SET_REGION: &str =
    "set Region or Zone in [Global] of the cloud config, or AWS_REGION, or run on EC2 with instance metadata reachable";

/// The AWS provider with a checked cloud config.
struct ConfiguredAws {
    config: CloudConfig,
    options: AwsOptions,
    /// The region `missing` found.
    region: Option<aws_config::Region>,
}

#[async_trait]
impl ConfiguredProvider for ConfiguredAws {
    async fn missing(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = scope_for(&self.config, self.options.allow_untagged_cloud) {
            problems.push(e.to_string());
        }
        match stratus_aws_api::region::resolve(self.config.region().as_deref(), HOW_TO_SET_REGION)
            .await
        {
            Ok(region) => self.region = Some(region),
            Err(problem) => problems.push(problem),
        }
        problems
    }

    async fn start(
        self: Box<Self>,
        metrics: &mut Registry,
    ) -> Result<Arc<dyn Cloud>, ProviderError> {
        let region = match self.region {
            Some(region) => region,
            None => {
                stratus_aws_api::region::resolve(self.config.region().as_deref(), HOW_TO_SET_REGION)
                    .await
                    .map_err(ProviderError::Start)?
            }
        };
        let cloud = AwsCloud::start(&self.config, region, self.options, metrics)
            .await
            .map_err(|e| ProviderError::Start(e.to_string()))?;
        Ok(Arc::new(cloud))
    }
}

/// Process options that are not part of the cloud config file.
#[derive(Debug, Clone)]
pub struct AwsOptions {
    /// `--allow-untagged-cloud`: run without a cluster ID.
    pub allow_untagged_cloud: bool,
    /// Instance cache tunables.
    pub cache: CacheOptions,
}

/// Why the AWS provider cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AwsInitError {
    #[error(
        "no cluster ID: set KubernetesClusterID in [Global] of the cloud config, or pass --allow-untagged-cloud"
    )]
    /// No cluster ID and no --allow-untagged-cloud.
    NoClusterId,
    #[error("SupportedTopologyInstanceTypePattern is not a valid regular expression: {0}")]
    /// The topology pattern does not compile (the config check normally catches it first).
    Pattern(String),
}

/// The AWS provider.
pub struct AwsCloud {
    instances: Arc<AwsInstances>,
    cache: Arc<InstanceCache>,
    metrics: Arc<ApiMetrics>,
    region: String,
    /// The EC2 seam, shared by every capability.
    ec2: Ec2,
    /// Cluster ID from the config (`None` only with `--allow-untagged-cloud`).
    cluster_id: Option<String>,
    /// Load balancers; `None` without a cluster ID (nothing could be tagged or reaped).
    load_balancers: Option<Arc<AwsLoadBalancers>>,
    /// Pod-CIDR routes; `None` when the config names neither a route table nor a cluster ID.
    routes: Option<Arc<AwsRoutes>>,
    /// Tags on the instances behind nodes.
    node_tags: Arc<AwsNodeTags>,
}

impl AwsCloud {
    /// Loads credentials (SDK default chain, optionally assuming `RoleARN`) for `region` (see
    /// [`stratus_aws_api::region::resolve`]), builds the EC2 client (endpoint from `[ServiceOverride]` or
    /// `AWS_ENDPOINT_URL[_EC2]`) and starts the cache.
    pub async fn start(
        config: &CloudConfig,
        region: Region,
        options: AwsOptions,
        registry: &mut Registry,
    ) -> Result<AwsCloud, AwsInitError> {
        let scope = scope_for(config, options.allow_untagged_cloud)?;
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(Duration::from_secs(30))
                    .build(),
            );
        let region = region.to_string();
        loader = loader.region(Region::new(region.clone()));
        let mut sdk = loader.load().await;
        if let Some(role) = config.global.role_arn.as_deref() {
            let provider = aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name("stratus-cloud-controller-manager")
                .configure(&sdk)
                .build()
                .await;
            sdk = sdk
                .into_builder()
                .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
                    provider,
                ))
                .build();
        }
        let mut ec2_config = aws_sdk_ec2::config::Builder::from(&sdk);
        if let Some(o) = config.endpoint_override("ec2", &region) {
            ec2_config = ec2_config
                .endpoint_url(&o.url)
                .region(Region::new(o.signing_region.clone()));
        }
        let metrics = Arc::new(ApiMetrics::register(registry));
        let mut elb_config = aws_sdk_elasticloadbalancing::config::Builder::from(&sdk);
        if let Some(o) = config.endpoint_override("elasticloadbalancing", &region) {
            elb_config = elb_config
                .endpoint_url(&o.url)
                .region(Region::new(o.signing_region.clone()));
        }
        let elb = ElbApi::new(
            aws_sdk_elasticloadbalancing::Client::from_conf(elb_config.build()),
            AwsApi::new(
                "elasticloadbalancing",
                metrics.clone(),
                RetryPolicy::default(),
            ),
        );
        let mut elbv2_config = aws_sdk_elasticloadbalancingv2::config::Builder::from(&sdk);
        if let Some(o) = config.endpoint_override("elasticloadbalancingv2", &region) {
            elbv2_config = elbv2_config
                .endpoint_url(&o.url)
                .region(Region::new(o.signing_region.clone()));
        }
        let elbv2 = ElbV2Api::new(
            aws_sdk_elasticloadbalancingv2::Client::from_conf(elbv2_config.build()),
            AwsApi::new(
                "elasticloadbalancingv2",
                metrics.clone(),
                RetryPolicy::default(),
            ),
        );
        let api = AwsApi::new("ec2", metrics.clone(), RetryPolicy::default());
        let ec2 = Ec2::new(aws_sdk_ec2::Client::from_conf(ec2_config.build()), api);
        let cache = InstanceCache::start(ec2.clone(), scope, options.cache);
        let pattern = config
            .global
            .supported_topology_instance_type_pattern
            .as_deref()
            .unwrap_or(topology::DEFAULT_SUPPORTED_PATTERN);
        // The config validator compiled it already; the default is a constant.
        let pattern =
            regex::Regex::new(pattern).map_err(|e| AwsInitError::Pattern(e.to_string()))?;
        let topology = Topology::start(ec2.clone(), pattern, options.cache.batch_window);
        let instances = Arc::new(AwsInstances::new(
            cache.clone(),
            ZoneIds::new(ec2.clone()),
            topology,
            region.clone(),
            config.global.node_ip_families.clone(),
        ));
        let load_balancers = config.cluster_id().map(|id| {
            Arc::new(AwsLoadBalancers::new(
                ec2.clone(),
                elb,
                elbv2,
                cache.clone(),
                id.to_string(),
                LbSettings {
                    vpc: config.global.vpc.clone(),
                    elb_security_group: config.global.elb_security_group.clone(),
                    disable_security_group_ingress: config.global.disable_security_group_ingress,
                    public_network_allow_list: config.global.public_network_allow_list.clone(),
                },
            ))
        });
        let routes =
            TableScope::from_config(config).map(|s| Arc::new(AwsRoutes::new(ec2.clone(), s)));
        tracing::info!(region = %region, "AWS provider started");
        Ok(AwsCloud {
            node_tags: Arc::new(AwsNodeTags::new(ec2.clone(), cache.clone())),
            routes,
            instances,
            cache,
            metrics,
            region,
            ec2,
            cluster_id: config.cluster_id().map(str::to_string),
            load_balancers,
        })
    }

    /// Whether the instance view has completed its first listing.
    pub fn has_synced(&self) -> bool {
        self.cache.has_synced()
    }

    /// The shared instance view.
    pub fn instance_cache(&self) -> &Arc<InstanceCache> {
        &self.cache
    }

    /// AWS API metrics.
    pub fn metrics(&self) -> &Arc<ApiMetrics> {
        &self.metrics
    }

    /// The EC2 seam.
    pub fn ec2(&self) -> &Ec2 {
        &self.ec2
    }

    /// The cluster ID resources are tagged with, if configured.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The region the provider works in.
    pub fn region(&self) -> &str {
        &self.region
    }
}

/// Which instances the cache lists, from the cluster ID or VPC.
pub fn scope_for(config: &CloudConfig, allow_untagged: bool) -> Result<Scope, AwsInitError> {
    if let Some(id) = config.cluster_id() {
        return Ok(Scope::ClusterTag {
            id: id.to_string(),
            legacy: config.uses_legacy_cluster_tag(),
        });
    }
    if !allow_untagged {
        return Err(AwsInitError::NoClusterId);
    }
    Ok(match config.global.vpc.as_deref() {
        Some(vpc) => Scope::Vpc(vpc.to_string()),
        None => Scope::Unscoped,
    })
}

impl Cloud for AwsCloud {
    fn instances(&self) -> Capability<dyn InstancesV2> {
        Ok(self.instances.clone())
    }

    fn load_balancer(&self) -> Capability<dyn LoadBalancer> {
        match &self.load_balancers {
            Some(lb) => Ok(lb.clone()),
            None => Err(Unsupported(
                "load balancers need KubernetesClusterID in [Global] of the cloud config (everything they make is tagged with it)".into(),
            )),
        }
    }

    fn routes(&self) -> Capability<dyn Routes> {
        match &self.routes {
            Some(r) => Ok(r.clone()),
            None => Err(Unsupported(
                "routes need RouteTableID or KubernetesClusterID (to find the route tables tagged for the cluster) in [Global] of the cloud config".into(),
            )),
        }
    }

    fn node_tags(&self) -> Capability<dyn NodeTags> {
        Ok(self.node_tags.clone())
    }

    fn readiness_gates(&self) -> Vec<ReadinessGate> {
        let cache = self.cache.clone();
        vec![ReadinessGate {
            name: "instance-cache-sync",
            pending: "the AWS instance cache has not completed its first listing".into(),
            // Waiting starts the first listing.
            opened: async move { cache.wait_until_synced().await }.boxed(),
        }]
    }

    fn describe(&self) -> String {
        format!("region {}", self.region)
    }
}
