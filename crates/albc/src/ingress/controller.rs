//! The Ingress driver: Ingresses of an IngressClass whose controller is `ingress.k8s.aws/alb`
//! (or annotated `kubernetes.io/ingress.class: <--ingress-class>`) are grouped, planned by
//! [`crate::ingress::model::plan_alb`] and applied: the ALB (subnets by the CCM's tag
//! discovery), listeners, rules in planned order (rewritten only when they differ), one target
//! group per backend fed by an internal TargetGroupBinding, the managed security group when the
//! group names none, the finalizer and `status.loadBalancer` of every member. A group with no
//! member left loses its ALB, target groups, bindings and managed group. Invalid annotations: a Warning Event, nothing changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use stratus_aws::lb::subnets::{choose_subnets, SubnetCache};
use stratus_cloud::CloudError;
use stratus_kube_kit::EventPublisher;
use tokio::time::Instant;

use crate::ingress::alb_api::{AlbApi, AlbState, LiveRule};
use crate::ingress::annotations;
use crate::ingress::model::{group_of, plan_alb, AlbSpec, GroupId};
use crate::ingress::rules::plan_rules;
use crate::ingress::security;
use crate::tgb::internal::{self, InternalBinding};

/// The IngressClass controller this driver serves.
pub const CONTROLLER: &str = "ingress.k8s.aws/alb";
/// The finalizer on managed Ingresses.
pub const FINALIZER: &str = "ingress.k8s.aws/resources";
/// Cluster tag on every resource.
pub const CLUSTER_TAG: &str = "elbv2.k8s.aws/cluster";
/// Group tag on every resource.
pub const STACK_TAG: &str = "ingress.k8s.aws/stack";
/// Resource kind tag.
pub const RESOURCE_TAG: &str = "ingress.k8s.aws/resource";
/// Label on the internal TargetGroupBindings.
pub const STACK_LABEL: &str = "ingress.k8s.aws/stack-hash";

/// Settings of the driver.
#[derive(Debug, Clone)]
pub struct IngressSettings {
    /// `--cluster-name`.
    pub cluster: String,
    /// `--ingress-class` (the legacy annotation value).
    pub ingress_class: String,
    /// VPC of the target groups.
    pub vpc: String,
    /// `--default-target-type=ip`.
    pub default_ip: bool,
    /// `--default-tags`.
    pub default_tags: BTreeMap<String, String>,
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] CloudError),
    /// The Kubernetes API failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// No usable subnets.
    #[error("{0}")]
    Subnets(String),
}

/// Shared state.
pub struct IngressCtx {
    client: Client,
    alb: AlbApi,
    subnets: Arc<SubnetCache>,
    events: EventPublisher,
    settings: IngressSettings,
    ingresses: Store<Ingress>,
    locks: Mutex<HashMap<GroupId, Arc<tokio::sync::Mutex<()>>>>,
    applied: Mutex<HashMap<GroupId, Applied>>,
}

/// Runs the driver until `shutdown` completes.
pub async fn run(
    client: Client,
    alb: AlbApi,
    subnets: Arc<SubnetCache>,
    settings: IngressSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let controller = Controller::new(
        Api::<Ingress>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    );
    let ctx = Arc::new(IngressCtx {
        events: EventPublisher::new(client.clone(), "ingress"),
        ingresses: controller.store(),
        client,
        alb,
        subnets,
        settings,
        locks: Mutex::new(HashMap::new()),
        applied: Mutex::new(HashMap::new()),
    });
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(ing: Arc<Ingress>, error: &IngressError, ctx: Arc<IngressCtx>) -> Action {
    tracing::warn!(ingress = %ing.name_any(), error = %error, "ingress reconcile failed");
    let (events, note) = (ctx.events.clone(), error.to_string());
    tokio::spawn(async move {
        events
            .publish(ing.as_ref(), true, "FailedDeployModel", "Reconcile", note)
            .await;
    });
    Action::requeue(Duration::from_secs(5))
}

/// Whether the Ingress is served here (class lookups go to the API server, once per class per
/// reconcile through `seen`).
async fn is_ours(
    ing: &Ingress,
    ctx: &IngressCtx,
    seen: &mut HashMap<String, bool>,
) -> Result<bool, kube::Error> {
    if let Some(c) = ing.annotations().get("kubernetes.io/ingress.class") {
        return Ok(c == &ctx.settings.ingress_class);
    }
    let Some(class) = ing.spec.as_ref().and_then(|s| s.ingress_class_name.clone()) else {
        return Ok(false);
    };
    if let Some(known) = seen.get(&class) {
        return Ok(*known);
    }
    let ic = Api::<IngressClass>::all(ctx.client.clone())
        .get_opt(&class)
        .await?;
    let ours = ic
        .and_then(|c| c.spec)
        .and_then(|s| s.controller)
        .is_some_and(|c| c == CONTROLLER);
    seen.insert(class, ours);
    Ok(ours)
}

fn has_finalizer(ing: &Ingress) -> bool {
    ing.finalizers().iter().any(|f| f == FINALIZER)
}

async fn set_finalizer(ing: &Ingress, ctx: &IngressCtx, on: bool) -> Result<(), kube::Error> {
    let mut list: Vec<String> = ing
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if on {
        list.push(FINALIZER.to_string());
    }
    let patch = serde_json::json!({"metadata": {
        "finalizers": list, "resourceVersion": ing.resource_version()}});
    Api::<Ingress>::namespaced(ctx.client.clone(), &ing.namespace().unwrap_or_default())
        .patch(
            &ing.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

async fn reconcile(ing: Arc<Ingress>, ctx: Arc<IngressCtx>) -> Result<Action, IngressError> {
    let deleting = ing.metadata.deletion_timestamp.is_some();
    let mut seen = HashMap::new();
    if !is_ours(&ing, &ctx, &mut seen).await? {
        if has_finalizer(&ing) && deleting {
            set_finalizer(&ing, &ctx, false).await?;
        }
        return Ok(Action::await_change());
    }
    let ann = match annotations::parse(&model_annotations(&ing)) {
        Ok(a) => a,
        Err(problems) => {
            warn(&ctx, &ing, problems.join("; ")).await;
            return Ok(Action::await_change());
        }
    };
    let group = group_of(&ing, &ann, None);
    let lock = ctx
        .locks
        .lock()
        .expect("locks")
        .entry(group.clone())
        .or_default()
        .clone();
    let _held = lock.lock().await;
    if !deleting && !has_finalizer(&ing) {
        set_finalizer(&ing, &ctx, true).await?;
    }
    // The members, this one as it is now (the store may lag behind).
    let mut members: Vec<Ingress> = Vec::new();
    for other in ctx.ingresses.state() {
        if other.namespace() == ing.namespace() && other.name_any() == ing.name_any() {
            continue;
        }
        if other.metadata.deletion_timestamp.is_some() || !is_ours(&other, &ctx, &mut seen).await? {
            continue;
        }
        if let Ok(a) = annotations::parse(&model_annotations(&other)) {
            if group_of(&other, &a, None) == group {
                members.push(other.as_ref().clone());
            }
        }
    }
    if !deleting {
        members.push(ing.as_ref().clone());
    }
    if members.is_empty() {
        ctx.applied.lock().expect("applied").remove(&group);
        teardown(&ctx, &group).await?;
    } else {
        let refs: Vec<&Ingress> = members.iter().collect();
        let spec = match plan_alb(
            &ctx.settings.cluster,
            &group,
            &refs,
            ctx.settings.default_ip,
        ) {
            Ok(s) => s,
            Err(problems) => {
                warn(&ctx, &ing, problems.join("; ")).await;
                return Ok(Action::await_change());
            }
        };
        // What the last apply left is forgotten until this one succeeds.
        let known = ctx.applied.lock().expect("applied").remove(&group);
        let applied = apply(&ctx, &spec, known).await?;
        let hostname = applied.lb.dns_name.clone();
        ctx.applied
            .lock()
            .expect("applied")
            .insert(group.clone(), applied);
        // Only members holding the finalizer get a hostname: one whose own reconcile has not
        // added it yet would otherwise look served and could be deleted without cleanup.
        for m in &members {
            let current = m.namespace() == ing.namespace() && m.name_any() == ing.name_any();
            if current || has_finalizer(m) {
                set_status(&ctx, m, &hostname).await?;
            }
        }
    }
    if deleting && has_finalizer(&ing) {
        set_finalizer(&ing, &ctx, false).await?;
    }
    Ok(Action::requeue(RESYNC))
}

fn model_annotations(ing: &Ingress) -> BTreeMap<String, String> {
    crate::ingress::model::annotations_of(ing)
}

async fn warn(ctx: &IngressCtx, ing: &Ingress, note: String) {
    tracing::warn!(ingress = %ing.name_any(), %note, "ingress not applied");
    ctx.events
        .publish(ing, true, "FailedBuildModel", "Reconcile", note)
        .await;
}

fn stack_tags(ctx: &IngressCtx, group: &GroupId) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_TAG.to_string(), ctx.settings.cluster.clone()),
        (STACK_TAG.to_string(), group.key()),
    ])
}

async fn set_status(ctx: &IngressCtx, ing: &Ingress, hostname: &str) -> Result<(), kube::Error> {
    let current = ing
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
    Api::<Ingress>::namespaced(ctx.client.clone(), &ing.namespace().unwrap_or_default())
        .patch_status(
            &ing.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// How long what a group's last apply left in AWS is trusted without reading it back (the
/// periodic resync, every [`RESYNC`], always reads AWS again).
const FRESH: Duration = Duration::from_secs(300);
/// Every Ingress is reconciled again after this long.
const RESYNC: Duration = Duration::from_secs(600);

/// What the last successful apply of a group left in AWS.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The plan applied.
    spec: AlbSpec,
    /// The load balancer.
    lb: AlbState,
    /// Target groups of the stack, name → ARN.
    target_groups: BTreeMap<String, String>,
    /// Listener ARNs by port.
    listeners: BTreeMap<i32, String>,
    /// Rules by listener port.
    rules: BTreeMap<i32, Vec<LiveRule>>,
    /// When.
    at: Instant,
}

/// Makes AWS match `spec`, starting from `known` (what the last apply left, if still fresh)
/// instead of reading AWS back; the same plan as `known`'s costs no call at all.
async fn apply(
    ctx: &IngressCtx,
    spec: &AlbSpec,
    known: Option<Applied>,
) -> Result<Applied, IngressError> {
    let known = known.filter(|k| k.at.elapsed() < FRESH);
    if let Some(k) = &known {
        if k.spec == *spec {
            return Ok(k.clone());
        }
    }
    let mut tags = ctx.settings.default_tags.clone();
    tags.extend(spec.tags.clone());
    tags.extend(stack_tags(ctx, &spec.group));
    // The managed frontend group, kept in step with the listeners (a changed plan only).
    let managed_group = if spec.security_groups.is_empty() {
        let stack = stack_tags(ctx, &spec.group);
        let id =
            security::ensure(ctx.subnets.ec2(), &ctx.settings.vpc, spec, &stack, &tags).await?;
        vec![id]
    } else {
        Vec::new()
    };
    let found = match &known {
        Some(k) => Some(k.lb.clone()),
        None => ctx.alb.find(&spec.name).await?,
    };
    let (lb, created) = match found {
        Some(lb) => (lb, false),
        None => {
            let all = ctx.subnets.subnets(&ctx.settings.vpc).await?;
            let chosen = choose_subnets(
                &all,
                &spec.subnets,
                &ctx.settings.cluster,
                !spec.internet_facing,
            )
            .map_err(IngressError::Subnets)?;
            let mut lb_tags = tags.clone();
            lb_tags.insert(RESOURCE_TAG.into(), "LoadBalancer".into());
            let lb = ctx
                .alb
                .create(
                    &spec.name,
                    spec.internet_facing,
                    &chosen,
                    if managed_group.is_empty() {
                        &spec.security_groups
                    } else {
                        &managed_group
                    },
                    &lb_tags,
                )
                .await?;
            (lb, true)
        }
    };
    // Target groups and their bindings (a binding made by a fresh earlier apply stays made).
    // Reading AWS lists every target group once: the stack's by their tags, and a leftover of
    // a planned name without them (adopted) from the same list, with no lookup per name.
    let (existing, by_name): (BTreeMap<String, String>, BTreeMap<String, String>) = match &known {
        Some(k) => (k.target_groups.clone(), BTreeMap::new()),
        None => {
            let all = ctx.alb.all_target_groups().await?;
            let tagged = ctx
                .alb
                .having_tags(&all, &stack_tags(ctx, &spec.group))
                .await?;
            (tagged.into_iter().collect(), all.into_iter().collect())
        }
    };
    let mut tg_arns = BTreeMap::new();
    for tg in spec.target_groups.values() {
        let arn = match existing.get(&tg.name) {
            Some(a) => a.clone(),
            None => match by_name.get(&tg.name).cloned() {
                Some(a) => a,
                None => {
                    let mut t = tags.clone();
                    t.insert(
                        RESOURCE_TAG.into(),
                        format!("{}/{}:{}", tg.namespace, tg.service, port_str(&tg.port)),
                    );
                    ctx.alb
                        .create_target_group(&ctx.settings.vpc, tg, &t)
                        .await?
                }
            },
        };
        let bound = known
            .as_ref()
            .is_some_and(|k| k.spec.target_groups.get(&tg.name) == Some(tg));
        if !bound {
            ensure_binding(ctx, tg, &arn, &spec.group).await?;
        }
        tg_arns.insert(tg.name.clone(), arn);
    }
    // Listeners by port, then rules in order.
    let mut listeners = match (&known, created) {
        (Some(k), _) => k.listeners.clone(),
        (None, true) => BTreeMap::new(),
        (None, false) => ctx.alb.listeners(&lb.arn).await?,
    };
    let mut rules = BTreeMap::new();
    let wanted_ports: Vec<i32> = spec.listeners.iter().map(|l| l.port.port).collect();
    for (port, arn) in listeners.clone() {
        if !wanted_ports.contains(&port) {
            ctx.alb.delete_listener(&arn).await?;
            listeners.remove(&port);
        }
    }
    for l in &spec.listeners {
        let port = l.port.port;
        let (arn, live) = match listeners.get(&port) {
            Some(a) => {
                let live = match known.as_ref().and_then(|k| k.rules.get(&port)) {
                    Some(r) => r.clone(),
                    None => ctx.alb.rules(a).await?,
                };
                (a.clone(), live)
            }
            None => (ctx.alb.create_listener(&lb.arn, l).await?, Vec::new()),
        };
        listeners.insert(port, arn.clone());
        let changes = plan_rules(&live, &l.rules, &tg_arns);
        for r in &changes.delete {
            ctx.alb.delete_rule(r).await?;
        }
        let mut now = changes.keep;
        for r in changes.create {
            let rule_arn = ctx
                .alb
                .create_rule(&arn, r, &tg_arns[&r.target_group])
                .await?;
            now.push(LiveRule {
                arn: rule_arn,
                priority: r.priority,
                hosts: r.hosts.clone(),
                paths: r.paths.clone(),
                target_group: tg_arns[&r.target_group].clone(),
            });
        }
        rules.insert(port, now);
    }
    // Target groups no rule uses any more.
    for (name, arn) in &existing {
        if !spec.target_groups.contains_key(name) {
            drop_binding(ctx, name).await?;
            ctx.alb.delete_target_group(arn).await?;
        }
    }
    Ok(Applied {
        spec: spec.clone(),
        lb,
        target_groups: tg_arns,
        listeners,
        rules,
        at: Instant::now(),
    })
}

fn port_str(p: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> String {
    match p {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n.to_string(),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
    }
}

/// The internal TargetGroupBinding of a backend (named after its target group).
async fn ensure_binding(
    ctx: &IngressCtx,
    tg: &crate::ingress::model::TargetGroupSpec,
    arn: &str,
    group: &GroupId,
) -> Result<(), kube::Error> {
    let binding = InternalBinding {
        namespace: &tg.namespace,
        name: &tg.name,
        arn,
        ip: tg.ip,
        service: &tg.service,
        port: tg.port.clone(),
        vpc: &ctx.settings.vpc,
        labels: BTreeMap::from([(
            STACK_LABEL.to_string(),
            crate::ingress::model::load_balancer_name(&ctx.settings.cluster, group),
        )]),
    };
    internal::ensure(&ctx.client, &binding).await
}

async fn drop_binding(ctx: &IngressCtx, name: &str) -> Result<(), kube::Error> {
    internal::remove(&ctx.client, name).await
}

/// Removes everything of a group with no member left.
async fn teardown(ctx: &IngressCtx, group: &GroupId) -> Result<(), IngressError> {
    let name = crate::ingress::model::load_balancer_name(&ctx.settings.cluster, group);
    if let Some(lb) = ctx.alb.find(&name).await? {
        ctx.alb.delete(&lb.arn).await?;
    }
    for (tg, arn) in ctx
        .alb
        .tagged_target_groups(&stack_tags(ctx, group))
        .await?
    {
        drop_binding(ctx, &tg).await?;
        ctx.alb.delete_target_group(&arn).await?;
    }
    security::remove(ctx.subnets.ec2(), &stack_tags(ctx, group)).await?;
    Ok(())
}
