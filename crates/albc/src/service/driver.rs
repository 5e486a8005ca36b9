//! The Service driver: LoadBalancer Services of class `service.k8s.aws/nlb` (or with the
//! `external` type annotation) get a network load balancer planned by
//! [`crate::service::plan::plan_nlb`]: subnets by the CCM's tag discovery (or the annotation)
//! with static private addresses as subnet mappings, load-balancer attributes held, one L4
//! listener (TCP, UDP, TCP_UDP or TLS with its certificates) and target group per port, each
//! target group fed by an internal TargetGroupBinding; the finalizer
//! `service.k8s.aws/resources` and `status.loadBalancer.ingress[].hostname`. Invalid
//! annotations: a Warning Event and nothing changed. A deleted (or no longer ours) Service loses
//! its NLB, target groups and bindings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_elasticloadbalancingv2::types::{IpAddressType, LoadBalancerTypeEnum};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use stratus_aws_api::elbv2::{
    LoadBalancer, NewLoadBalancer, NewTargetGroup, Placement, SubnetMapping,
};
use stratus_aws_api::subnets::{choose_subnets, SubnetCache};
use stratus_aws_api::ElbV2Api;
use stratus_kube_kit::EventPublisher;

use crate::ingress::backend_group::SharedBackendGroup;
use crate::ingress::live::health_settings;
use crate::ingress::tags::CLUSTER_TAG;
use crate::ingress::target_groups::{
    hold_target_group_attributes, stack_target_groups, tagged_target_groups, target_type,
};
use crate::ingress::{drift, security};
use crate::service::annotations::{is_nlb_service, parse};
use crate::service::listeners::{self, protocol_enum, ListenerStep, LiveListener, WantedListener};
use crate::service::plan::{
    frontend_rules, nlb_name, plan_nlb, stack_key, subnet_slots, NlbSpec, SubnetSlot,
};
use crate::tgb::internal::{self, InternalBinding};

/// The finalizer on managed Services.
pub const FINALIZER: &str = "service.k8s.aws/resources";
/// Stack tag (`namespace/name`) on every resource of a Service.
pub const STACK_TAG: &str = "service.k8s.aws/stack";
/// Resource kind tag (`LoadBalancer`, or the port of a target group).
pub const RESOURCE_TAG: &str = "service.k8s.aws/resource";
/// Label on the internal TargetGroupBindings: the NLB's name.
pub const STACK_LABEL: &str = "service.k8s.aws/stack-name";

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] stratus_cloud::CloudError),
    /// The Kubernetes API failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

/// Settings of the driver.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// `--cluster-name`.
    pub cluster: String,
    /// VPC of the target groups and subnets.
    pub vpc: String,
    /// `--default-tags`.
    pub default_tags: BTreeMap<String, String>,
    /// `--load-balancer-class`.
    pub class: String,
    /// `--service-max-concurrent-reconciles`.
    pub concurrency: u16,
    /// Feature gate `NLBSecurityGroup`: a managed frontend group (and the backend one) on NLBs
    /// that name none.
    pub security_groups: bool,
    /// The shared backend security group.
    pub backend: Arc<SharedBackendGroup>,
}

/// Shared state.
pub struct ServiceCtx {
    client: Client,
    alb: ElbV2Api,
    subnets: Arc<SubnetCache>,
    events: EventPublisher,
    settings: ServiceSettings,
}

/// Runs the driver until `shutdown` completes.
pub async fn run(
    client: Client,
    alb: ElbV2Api,
    subnets: Arc<SubnetCache>,
    settings: ServiceSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let controller = Controller::new(
        Api::<Service>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .with_config(Config::default().concurrency(settings.concurrency.max(1)));
    let ctx = Arc::new(ServiceCtx {
        events: EventPublisher::new(client.clone(), "service"),
        client,
        alb,
        subnets,
        settings,
    });
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(svc: Arc<Service>, error: &ServiceError, ctx: Arc<ServiceCtx>) -> Action {
    tracing::warn!(service = %svc.name_any(), error = %error, "service reconcile failed");
    let (events, note) = (ctx.events.clone(), error.to_string());
    tokio::spawn(async move {
        events
            .publish(svc.as_ref(), true, "FailedDeployModel", "Reconcile", note)
            .await;
    });
    Action::requeue(Duration::from_secs(5))
}

fn has_finalizer(svc: &Service) -> bool {
    svc.finalizers().iter().any(|f| f == FINALIZER)
}

async fn set_finalizer(svc: &Service, ctx: &ServiceCtx, on: bool) -> Result<(), kube::Error> {
    let mut list: Vec<String> = svc
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if on {
        list.push(FINALIZER.to_string());
    }
    let patch = serde_json::json!({"metadata": {
        "finalizers": list, "resourceVersion": svc.resource_version()}});
    api(ctx, svc)
        .patch(
            &svc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

fn api(ctx: &ServiceCtx, svc: &Service) -> Api<Service> {
    Api::namespaced(ctx.client.clone(), &svc.namespace().unwrap_or_default())
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<ServiceCtx>) -> Result<Action, ServiceError> {
    let deleting = svc.metadata.deletion_timestamp.is_some();
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    if deleting || !is_nlb_service(&svc, &ctx.settings.class) {
        if has_finalizer(&svc) {
            teardown(&ctx, &ns, &name).await?;
            set_finalizer(&svc, &ctx, false).await?;
        }
        return Ok(Action::await_change());
    }
    let plan = parse(&svc.annotations().clone())
        .and_then(|ann| plan_nlb(&ctx.settings.cluster, &svc, &ann));
    let spec = match plan {
        Ok(s) => s,
        Err(problems) => {
            warn(&ctx, &svc, problems.join("; ")).await;
            return Ok(Action::await_change());
        }
    };
    if !has_finalizer(&svc) {
        set_finalizer(&svc, &ctx, true).await?;
    }
    let Some(hostname) = apply(&ctx, &svc, &spec).await? else {
        return Ok(Action::await_change());
    };
    set_status(&ctx, &svc, &hostname).await?;
    Ok(Action::requeue(Duration::from_secs(600)))
}

async fn warn(ctx: &ServiceCtx, svc: &Service, note: String) {
    tracing::warn!(service = %svc.name_any(), %note, "service not applied");
    ctx.events
        .publish(svc, true, "FailedBuildModel", "Reconcile", note)
        .await;
}

fn stack_tags(ctx: &ServiceCtx, ns: &str, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_TAG.to_string(), ctx.settings.cluster.clone()),
        (STACK_TAG.to_string(), stack_key(ns, name)),
    ])
}

async fn set_status(ctx: &ServiceCtx, svc: &Service, hostname: &str) -> Result<(), kube::Error> {
    let current = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .and_then(|i| i.first())
        .and_then(|i| i.hostname.clone());
    if current.as_deref() == Some(hostname) {
        return Ok(());
    }
    let patch =
        serde_json::json!({"status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}}});
    api(ctx, svc)
        .patch_status(
            &svc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// Makes AWS match `spec`; the NLB's DNS name, or `None` when a Warning said why nothing was
/// made.
async fn apply(
    ctx: &ServiceCtx,
    svc: &Service,
    spec: &NlbSpec,
) -> Result<Option<String>, ServiceError> {
    let mut tags = ctx.settings.default_tags.clone();
    tags.extend(spec.tags.clone());
    tags.extend(stack_tags(ctx, &spec.namespace, &spec.service));
    let all = ctx.subnets.subnets(&ctx.settings.vpc).await?;
    let slots = choose_subnets(
        &all,
        &spec.subnets,
        &ctx.settings.cluster,
        !spec.internet_facing,
    )
    .and_then(|chosen| {
        let cidrs: BTreeMap<String, String> =
            all.iter().map(|s| (s.id.clone(), s.cidr.clone())).collect();
        subnet_slots(&chosen, &cidrs, &spec.private_ips, &spec.eip_allocations)
    });
    let slots = match slots {
        Ok(s) => s,
        Err(problem) => {
            ctx.subnets.invalidate().await;
            warn(ctx, svc, problem).await;
            return Ok(None);
        }
    };
    let stack = stack_tags(ctx, &spec.namespace, &spec.service);
    let (groups, backend) = security_groups(ctx, spec, &stack, &tags).await?;
    let lb = match ctx.alb.load_balancer(&spec.name).await? {
        Some(lb) if lb.is_internet_facing() == spec.internet_facing => {
            if subnets_differ(&lb.subnets, &slots) {
                tracing::info!(load_balancer = %spec.name, "subnets changed: setting them");
                ctx.alb
                    .set_subnets(&lb.arn, &subnet_mappings(&slots))
                    .await?;
            }
            hold_security_groups(ctx, spec, &lb, &groups, &stack).await?;
            lb
        }
        found => {
            if let Some(old) = found {
                tracing::info!(load_balancer = %spec.name, "scheme changed: replacing the load balancer");
                ctx.alb.delete_load_balancer(&old.arn).await?;
            }
            let mut lb_tags = tags.clone();
            lb_tags.insert(RESOURCE_TAG.into(), "LoadBalancer".into());
            ctx.alb
                .create_load_balancer(&NewLoadBalancer {
                    name: &spec.name,
                    kind: LoadBalancerTypeEnum::Network,
                    internet_facing: spec.internet_facing,
                    ip_address_type: Some(IpAddressType::Ipv4),
                    placement: Placement::Mappings(subnet_mappings(&slots)),
                    security_groups: &groups,
                    tags: &lb_tags,
                })
                .await?
        }
    };
    // Target groups (health checks changed in place) and their bindings.
    let (all, tagged) = stack_target_groups(&ctx.alb, &stack).await?;
    let existing: BTreeMap<String, String> = tagged.into_iter().collect();
    let mut tg_arns = BTreeMap::new();
    for p in &spec.ports {
        let live = all.iter().find(|g| g.name == p.target_group);
        if let Some(g) = live.filter(|g| drift::health_differs(&g.health, &spec.health)) {
            ctx.alb
                .modify_health_check(&g.arn, &health_settings(&spec.health))
                .await?;
        }
        let made = existing
            .get(&p.target_group)
            .cloned()
            .or(live.map(|g| g.arn.clone()));
        let fresh = made.is_none();
        let arn = match made {
            Some(a) => a,
            None => {
                let mut t = tags.clone();
                t.insert(RESOURCE_TAG.into(), p.port.to_string());
                ctx.alb
                    .create_target_group(&NewTargetGroup {
                        name: &p.target_group,
                        protocol: protocol_enum(p.target_protocol),
                        port: p.port,
                        vpc_id: &ctx.settings.vpc,
                        target_type: target_type(spec.ip),
                        health_check: &health_settings(&spec.health),
                        tags: &t,
                    })
                    .await?
            }
        };
        hold_target_group_attributes(&ctx.alb, &arn, &spec.tg_attributes, fresh).await?;
        let binding = InternalBinding {
            namespace: &spec.namespace,
            name: &p.target_group,
            arn: &arn,
            ip: spec.ip,
            service: &spec.service,
            port: IntOrString::Int(p.port),
            vpc: &ctx.settings.vpc,
            labels: BTreeMap::from([(STACK_LABEL.to_string(), spec.name.clone())]),
            networking: backend.as_deref().and_then(|b| {
                p.target_port
                    .clone()
                    .map(|port| internal::backend_networking(b, port, p.sg_protocols()))
            }),
            node_selector: node_selector(&spec.node_labels),
        };
        internal::ensure(&ctx.client, &binding).await?;
        tg_arns.insert(p.port, arn);
    }
    hold_attributes(ctx, &lb.arn, &spec.lb_attributes).await?;
    apply_listeners(ctx, &lb.arn, &wanted_listeners(spec, &tg_arns)).await?;
    // Target groups no port uses any more.
    for (name, arn) in &existing {
        if !spec.ports.iter().any(|p| &p.target_group == name) {
            internal::remove(&ctx.client, name).await?;
            ctx.alb.delete_target_group(arn).await?;
        }
    }
    Ok(Some(lb.dns_name))
}

/// Who owns the managed frontend group of a Service's NLB.
fn owner(stack: &BTreeMap<String, String>) -> security::Owner<'_> {
    security::Owner {
        stack_key: STACK_TAG,
        resource_key: RESOURCE_TAG,
        stack,
    }
}

/// The NLB's security groups and the backend group its targets admit: the given ones (plus
/// the backend group with `manage-backend-security-group-rules`), else a managed frontend group
/// kept in step with the listeners plus the backend group; none with the gate off.
async fn security_groups(
    ctx: &ServiceCtx,
    spec: &NlbSpec,
    stack: &BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> Result<(Vec<String>, Option<String>), ServiceError> {
    let managed = spec.security_groups.is_empty();
    if managed && !ctx.settings.security_groups {
        return Ok((Vec::new(), None));
    }
    let ec2 = ctx.subnets.ec2();
    let (vpc, cluster) = (&ctx.settings.vpc, &ctx.settings.cluster);
    let backend = if managed || spec.manage_backend_rules {
        ctx.settings.backend.id(ec2, vpc, cluster).await?
    } else {
        None
    };
    let mut groups = if managed {
        let rules = frontend_rules(spec);
        vec![security::ensure(ec2, vpc, &spec.name, &rules, owner(stack), tags).await?]
    } else {
        spec.security_groups.clone()
    };
    groups.extend(backend.clone());
    Ok((groups, backend))
}

/// Makes a live NLB's groups the wanted ones. AWS cannot add groups to an NLB made without
/// any: that is logged and left (the Service must be made again to get them).
async fn hold_security_groups(
    ctx: &ServiceCtx,
    spec: &NlbSpec,
    lb: &LoadBalancer,
    groups: &[String],
    stack: &BTreeMap<String, String>,
) -> Result<(), ServiceError> {
    let Some(set) = drift::security_groups_to_set(lb, groups) else {
        return Ok(());
    };
    if lb.security_groups.is_empty() {
        tracing::warn!(load_balancer = %spec.name, "the NLB was made without security groups; AWS cannot add them");
        return Ok(());
    }
    ctx.alb.set_security_groups(&lb.arn, &set).await?;
    if !spec.security_groups.is_empty() {
        // Given groups replaced the managed one: it goes.
        security::remove(ctx.subnets.ec2(), owner(stack)).await?;
    }
    Ok(())
}

/// Whether the live subnets (sorted) are not the chosen ones.
fn subnets_differ(live: &[String], slots: &[SubnetSlot]) -> bool {
    let mut chosen: Vec<&str> = slots.iter().map(|s| s.subnet.as_str()).collect();
    chosen.sort_unstable();
    live.iter().map(String::as_str).ne(chosen)
}

/// One listener per port forwarding to its target group; TLS ones with the certificates.
fn wanted_listeners(spec: &NlbSpec, tg_arns: &BTreeMap<i32, String>) -> Vec<WantedListener> {
    spec.ports
        .iter()
        .map(|p| {
            let tls = spec.tls.as_ref().filter(|_| p.tls());
            WantedListener {
                port: p.port,
                protocol: p.protocol,
                target_group: tg_arns[&p.port].clone(),
                certificates: tls.map(|t| t.certificates.clone()).unwrap_or_default(),
                ssl_policy: tls.map(|t| t.ssl_policy.clone()),
                alpn: tls.and_then(|t| t.alpn.clone()),
            }
        })
        .collect()
}

/// Makes the listeners the wanted ones by [`listeners::plan`], and each TLS listener's extra
/// certificates the wanted ones by difference.
async fn apply_listeners(
    ctx: &ServiceCtx,
    lb_arn: &str,
    wanted: &[WantedListener],
) -> Result<(), ServiceError> {
    let live: BTreeMap<i32, LiveListener> = ctx
        .alb
        .listeners(lb_arn)
        .await?
        .iter()
        .filter_map(LiveListener::of)
        .collect();
    let mut arns: BTreeMap<i32, String> = live.iter().map(|(p, l)| (*p, l.arn.clone())).collect();
    let mut fresh = Vec::new();
    for step in listeners::plan(&live, wanted) {
        match step {
            ListenerStep::Delete(arn) => ctx.alb.delete_listener(&arn).await?,
            ListenerStep::Modify(arn, w) => {
                ctx.alb.modify_listener(&arn, &w.modify_settings()).await?
            }
            ListenerStep::Create(w) => {
                let arn = ctx
                    .alb
                    .create_listener(lb_arn, &w.create_settings())
                    .await?;
                fresh.push(w.port);
                arns.insert(w.port, arn);
            }
        }
    }
    for w in wanted.iter().filter(|w| !w.certificates.is_empty()) {
        let arn = &arns[&w.port];
        let want = listeners::extra_certificates(w);
        let have = if fresh.contains(&w.port) {
            Vec::new()
        } else {
            ctx.alb.extra_certificates(arn).await?
        };
        let (add, remove) = drift::list_changes(&have, &want);
        ctx.alb.change_certificates(arn, &add, true).await?;
        ctx.alb.change_certificates(arn, &remove, false).await?;
    }
    Ok(())
}

/// Sets the asked-for load-balancer attributes whose live value differs (no call when none is
/// asked for).
async fn hold_attributes(
    ctx: &ServiceCtx,
    lb_arn: &str,
    wanted: &BTreeMap<String, String>,
) -> Result<(), ServiceError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let live = ctx.alb.load_balancer_attributes(lb_arn).await?;
    let set = drift::differing(&live, wanted);
    if !set.is_empty() {
        ctx.alb
            .modify_load_balancer_attributes(lb_arn, &set)
            .await?;
    }
    Ok(())
}

/// The subnet mappings of the chosen slots: each subnet with its static private address or
/// Elastic IP when one is asked for.
fn subnet_mappings(slots: &[SubnetSlot]) -> Vec<SubnetMapping> {
    slots
        .iter()
        .map(|s| SubnetMapping {
            subnet: s.subnet.clone(),
            allocation_id: s.allocation.clone(),
            private_ipv4_address: s.private_ip.map(|ip| ip.to_string()),
        })
        .collect()
}

/// `target-node-labels` as a binding's `spec.nodeSelector` (none: every node).
fn node_selector(labels: &BTreeMap<String, String>) -> Option<LabelSelector> {
    (!labels.is_empty()).then(|| LabelSelector {
        match_labels: Some(labels.clone()),
        match_expressions: None,
    })
}

/// Removes the NLB, its target groups and bindings.
async fn teardown(ctx: &ServiceCtx, ns: &str, name: &str) -> Result<(), ServiceError> {
    if let Some(lb) = ctx
        .alb
        .load_balancer(&nlb_name(&ctx.settings.cluster, ns, name))
        .await?
    {
        ctx.alb.delete_load_balancer(&lb.arn).await?;
    }
    for (tg, arn) in tagged_target_groups(&ctx.alb, &stack_tags(ctx, ns, name)).await? {
        internal::remove(&ctx.client, &tg).await?;
        ctx.alb.delete_target_group(&arn).await?;
    }
    let stack = stack_tags(ctx, ns, name);
    security::remove(ctx.subnets.ec2(), owner(&stack)).await?;
    ctx.settings
        .backend
        .release_if_unused(ctx.subnets.ec2(), &ctx.alb, &ctx.settings.cluster)
        .await?;
    Ok(())
}
