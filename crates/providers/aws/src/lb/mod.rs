//! AWS load balancers for `type: LoadBalancer` Services: Classic ELB (default), NLB, and
//! target groups only (`type: none`, Deckhouse's patch).
//!
//! [`AwsLoadBalancers`] implements [`stratus_cloud::LoadBalancer`]. Every resource is found
//! again by a deterministic name (so an interrupted create resumes without duplicates), tagged
//! for the cluster and the Service, and reaped when its Service is gone.

mod backend_memo;
mod classic;
mod classic_spec;
mod network;
mod network_calls;
mod network_spec;
mod reaper;
mod target_groups;
mod target_groups_spec;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use stratus_cloud::{CloudError, Ingress, LoadBalancer, LoadBalancerRequest, NodeInfo, ServiceRef};

use crate::instance::Instance;
use crate::instance_cache::InstanceCache;
use stratus_aws_api::annotations::{LbAnnotations, LbKind};
use stratus_aws_api::ec2::Ec2;
use stratus_aws_api::elb::{self as elb_api, ElbApi};
use stratus_aws_api::elbv2::ElbV2Api;
use stratus_aws_api::subnets::SubnetCache;

/// Cloud-config settings that shape load balancers.
#[derive(Debug, Clone, Default)]
pub struct LbSettings {
    /// `[Global] VPC`; otherwise the VPC of the nodes.
    pub vpc: Option<String>,
    /// `[Global] ElbSecurityGroup`: one group for every Classic ELB instead of one each.
    pub elb_security_group: Option<String>,
    /// `[Global] DisableSecurityGroupIngress`: leave node groups alone.
    pub disable_security_group_ingress: bool,
    /// `[Global] PublicNetworkAllowList`: the client ranges of an NLB whose Service is open to
    /// everywhere (see [`stratus_aws_api::sg_rules::client_ranges`]).
    pub public_network_allow_list: Vec<String>,
}

/// What Stratus remembers of one load balancer between reconciles.
#[derive(Debug, Clone, Default)]
struct Known {
    /// Registered instance IDs.
    targets: BTreeSet<String>,
    /// Node security groups that already carry this load balancer's rule.
    node_groups: BTreeSet<String>,
    /// Every security group of the registered instances (to spot a node in a new group).
    instance_groups: BTreeSet<String>,
    /// The group the node rules point at, and whether Stratus made it (Classic ELB).
    source_group: Option<(String, bool)>,
    /// Target groups with the node port their targets use (NLB, `type: none`).
    target_groups: Vec<(String, i32)>,
    /// The target groups made for a `type: none` Service (deleted when it changes kind or goes).
    only_target_groups: Vec<String>,
}

/// AWS implementation of the load-balancer capability.
pub struct AwsLoadBalancers {
    ec2: Ec2,
    elb: ElbApi,
    elbv2: ElbV2Api,
    cache: Arc<InstanceCache>,
    cluster_id: String,
    settings: LbSettings,
    subnets: SubnetCache,
    vpc: OnceLock<String>,
    known: Mutex<HashMap<String, Known>>,
    /// The cluster's backend security group, once found or made: (VPC, group ID). An async
    /// lock held across the look-up and the create, so concurrent Service syncs make the group
    /// once (single flight): the first finds or creates it, the others wait and reuse its answer.
    backend: tokio::sync::Mutex<Option<(String, String)>>,
    /// Held while the backend rules of the node groups are checked and added, so concurrent
    /// syncs add each rule once; it keeps what recent checks found, so syncs whose nodes sit
    /// in groups already checked make no EC2 call.
    backend_rules: tokio::sync::Mutex<Option<backend_memo::BackendRuleMemo>>,
}

fn invalid(e: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidInput(e.to_string())
}

/// Parses annotations into the typed form, as an input error listing every problem.
pub fn parse_annotations(request: &LoadBalancerRequest) -> Result<LbAnnotations, CloudError> {
    stratus_aws_api::annotations::parse(&request.annotations).map_err(|e| {
        invalid(format!(
            "invalid annotations: {}",
            e.to_string().replace('\n', "; ")
        ))
    })
}

impl AwsLoadBalancers {
    /// Load balancers for the cluster `cluster_id`.
    pub fn new(
        ec2: Ec2,
        elb: ElbApi,
        elbv2: ElbV2Api,
        cache: Arc<InstanceCache>,
        cluster_id: String,
        settings: LbSettings,
    ) -> Self {
        Self {
            subnets: SubnetCache::new(ec2.clone()),
            ec2,
            elb,
            elbv2,
            cache,
            cluster_id,
            settings,
            vpc: OnceLock::new(),
            known: Mutex::new(HashMap::new()),
            backend: tokio::sync::Mutex::new(None),
            backend_rules: tokio::sync::Mutex::new(None),
        }
    }

    /// Instances behind the target nodes (nodes filtered by `target-node-labels`).
    async fn target_instances(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<Vec<Arc<Instance>>, CloudError> {
        // All lookups at once: instances the cache lacks are fetched in one batched call.
        let lookups = request
            .nodes
            .iter()
            .filter(|n| {
                ann.target_node_labels
                    .iter()
                    .all(|(k, v)| n.labels.get(k) == Some(v))
            })
            .map(|node| {
                let info = NodeInfo {
                    name: node.name.clone(),
                    provider_id: Some(node.provider_id.clone()),
                    addresses: Vec::new(),
                    provided_node_ip: None,
                };
                async move { (node.name.clone(), self.cache.find(&info).await) }
            });
        let mut out = Vec::new();
        for (node, found) in futures::future::join_all(lookups).await {
            match found? {
                Some(i) if !i.state.is_gone() => out.push(i),
                _ => tracing::debug!(node = %node, "target node has no live instance; skipped"),
            }
        }
        out.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        Ok(out)
    }

    /// The cluster VPC: configured, or the one of the nodes.
    fn vpc(&self, instances: &[Arc<Instance>]) -> Result<String, CloudError> {
        if let Some(v) = &self.settings.vpc {
            return Ok(v.clone());
        }
        if let Some(v) = self.vpc.get() {
            return Ok(v.clone());
        }
        let found = instances
            .iter()
            .map(|i| i.vpc_id.clone())
            .find(|v| !v.is_empty())
            .ok_or_else(|| {
                invalid("cannot tell the cluster VPC: set VPC in [Global] of the cloud config, or wait for a Ready node")
            })?;
        Ok(self.vpc.get_or_init(|| found).clone())
    }

    fn remember(&self, name: &str, f: impl FnOnce(&mut Known)) {
        let mut known = self.known.lock().expect("known lock");
        f(known.entry(name.to_string()).or_default());
    }

    fn recall(&self, name: &str) -> Option<Known> {
        self.known.lock().expect("known lock").get(name).cloned()
    }

    fn forget(&self, name: &str) {
        self.known.lock().expect("known lock").remove(name);
    }
}

#[async_trait]
impl LoadBalancer for AwsLoadBalancers {
    async fn ensure(&self, request: &LoadBalancerRequest) -> Result<Vec<Ingress>, CloudError> {
        let ann = parse_annotations(request)?;
        if ann.kind != LbKind::TargetGroupsOnly {
            // The Service was of `type: none` before: its groups go.
            self.delete_target_groups_only(&request.service.default_load_balancer_name())
                .await?;
        }
        match ann.kind {
            LbKind::Classic => self.ensure_classic(request, &ann).await,
            LbKind::Network => self.ensure_network(request, &ann).await,
            LbKind::TargetGroupsOnly => self.ensure_target_groups_only(request, &ann).await,
            LbKind::Elsewhere => Err(CloudError::ImplementedElsewhere(
                "this load-balancer type belongs to the AWS Load Balancer Controller".into(),
            )),
        }
    }

    async fn update_targets(&self, request: &LoadBalancerRequest) -> Result<bool, CloudError> {
        let ann = parse_annotations(request)?;
        match ann.kind {
            LbKind::Classic => self.update_classic_targets(request, &ann).await,
            LbKind::Network => self.update_network_targets(request, &ann).await,
            LbKind::TargetGroupsOnly => self.update_target_groups_only(request, &ann).await,
            LbKind::Elsewhere => Ok(false),
        }
    }

    async fn ensure_deleted(
        &self,
        _cluster_name: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        // Both kinds: the annotation that chose one may have changed or be gone.
        let name = service.default_load_balancer_name();
        self.delete_classic(&name).await?;
        self.delete_network(&name).await?;
        self.delete_target_groups_only(&name).await?;
        self.forget(&name);
        Ok(())
    }

    async fn reap(&self, _cluster_name: &str, live: &[ServiceRef]) -> Result<usize, CloudError> {
        let live: BTreeSet<String> = live
            .iter()
            .map(|s| s.default_load_balancer_name())
            .collect();
        self.reap_orphans(&live).await
    }
}

/// Tags by name, fetched [`elb_api::TAG_BATCH`] names per call.
async fn tags_in_batches(
    elb: &ElbApi,
    names: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, CloudError> {
    let mut out = BTreeMap::new();
    for chunk in names.chunks(elb_api::TAG_BATCH) {
        out.extend(elb.tags(chunk).await?);
    }
    Ok(out)
}
