//! The TargetGroupBinding driver: watches bindings, Services, EndpointSlices and Nodes
//! (cached reflectors), and per binding registers the difference between the wanted targets and
//! the ones it last applied. Cache first: a binding whose wanted targets did not change makes no
//! AWS call; AWS is read again (DescribeTargetHealth) only after a failure, a restart or every
//! `--sync-period`. Churn is coalesced (quiet period with a deadline, see
//! [`crate::tgb::plan::coalesce`]); one binding never reconciles twice at once.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use stratus_aws_api::elbv2::{ElbV2Api, TargetRef};
use stratus_cloud::CloudError;
use stratus_kube_kit::EventPublisher;
use stratus_runtime::backoff::Backoff;
use tokio::time::Instant;

use crate::crd::{TargetGroupBinding, TGB_FINALIZER};
use crate::metrics::TgbMetrics;
use crate::tgb::plan::{active, coalesce, plan_targets};
use crate::tgb::readiness::{
    condition_type, gate_pending, gates_to_set, registered_while_unready, CONDITION_PREFIX,
};
use crate::tgb::sg_rules::{NetworkingRules, RulesError};
use crate::tgb::targets::{
    instance_targets, ip_targets, service_port, TargetError, TargetType, SERVICE_NAME_LABEL,
};

/// The name Events are reported under.
pub const MANAGER: &str = "targetGroupBinding";

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct TgbSettings {
    /// Only this namespace (all when None).
    pub namespace: Option<String>,
    /// Bindings reconciled at once.
    pub concurrency: u16,
    /// Quiet period before changed targets are applied.
    pub coalesce: Duration,
    /// Longest a change waits for quiet.
    pub coalesce_max_delay: Duration,
    /// AWS is read again this often even without changes.
    pub sync_period: Duration,
    /// Retry delays of a failing binding.
    pub backoff: Backoff,
    /// Set the bindings' readiness-gate conditions on pods (watches pods).
    pub readiness_gates: bool,
    /// How often pending readiness gates are checked against target health.
    pub gate_poll: Duration,
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum TgbError {
    /// The wanted targets cannot be computed.
    #[error(transparent)]
    Targets(#[from] TargetError),
    /// The binding's spec is unusable.
    #[error("{0}")]
    Spec(String),
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] CloudError),
    /// The Kubernetes API failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The `spec.networking` rules could not be kept.
    #[error("networking: {0}")]
    Networking(#[from] RulesError),
}

impl TgbError {
    /// Short category for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            TgbError::Targets(e) => e.category(),
            TgbError::Spec(_) => "InvalidSpec",
            TgbError::Aws(_) => "AwsError",
            TgbError::Kube(_) => "KubernetesError",
            TgbError::Networking(_) => "FailedNetworkReconcile",
        }
    }
}

/// What was last applied to one binding's target group.
#[derive(Debug, Clone)]
struct Applied {
    arn: String,
    target_type: TargetType,
    targets: BTreeSet<TargetRef>,
    checked: Instant,
}

/// Unapplied changes of one binding being coalesced.
#[derive(Debug, Clone)]
struct Pending {
    wanted: BTreeSet<TargetRef>,
    since: Instant,
    last_change: Instant,
}

/// Shared state of the reconciles.
pub struct Ctx {
    client: Client,
    elbv2: ElbV2Api,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    nodes: Store<Node>,
    pods: Option<Store<Pod>>,
    events: EventPublisher,
    metrics: TgbMetrics,
    settings: TgbSettings,
    applied: Mutex<HashMap<String, Applied>>,
    pending: Mutex<HashMap<String, Pending>>,
    failures: Mutex<HashMap<String, u32>>,
    started: Instant,
    /// The bindings (the networking rules wait for every one before removing any).
    bindings: Store<TargetGroupBinding>,
    networking: Option<Arc<NetworkingRules>>,
    /// `spec.targetGroupName` → ARN, looked up once.
    names: Mutex<HashMap<String, String>>,
}

fn key(tgb: &TargetGroupBinding) -> String {
    format!("{}/{}", tgb.namespace().unwrap_or_default(), tgb.name_any())
}

/// The namespaced API of `K`: one namespace (`--watch-namespace`) or all.
pub(crate) fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The bindings in `namespace` that point at Service `name`.
fn bindings_of(
    tgbs: &Store<TargetGroupBinding>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<TargetGroupBinding>> {
    tgbs.state()
        .iter()
        .filter(|t| t.namespace().as_deref() == Some(namespace) && t.spec.service_ref.name == name)
        .map(|t| ObjectRef::from_obj(t.as_ref()))
        .collect()
}

/// Runs the controller until `shutdown` completes.
pub async fn run(
    client: Client,
    elbv2: ElbV2Api,
    networking: Option<NetworkingRules>,
    metrics: TgbMetrics,
    settings: TgbSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let wc = watcher::Config::default().any_semantic();
    let (services, svc_writer) = reflector::store();
    let svc_stream = reflector::reflector(
        svc_writer,
        watcher(api::<Service>(&client, &settings.namespace), wc.clone()),
    )
    .default_backoff()
    .touched_objects();
    let (slices, slice_writer) = reflector::store();
    let slice_stream = reflector::reflector(
        slice_writer,
        watcher(
            api::<EndpointSlice>(&client, &settings.namespace),
            wc.clone().labels(SERVICE_NAME_LABEL),
        ),
    )
    .default_backoff()
    .touched_objects();
    let (nodes, node_writer) = reflector::store();
    let node_stream = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), wc.clone()),
    )
    .default_backoff()
    .touched_objects()
    // Heartbeats change nothing a target depends on; readiness and labels do.
    .predicate_filter(node_fingerprint, Default::default());
    let (pods, pod_stream) = if settings.readiness_gates {
        let (reader, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(api::<Pod>(&client, &settings.namespace), wc.clone())
                // Only what the gates need is kept in memory.
                .modify(|p: &mut Pod| {
                    p.metadata.managed_fields = None;
                    p.metadata.annotations = None;
                    if let Some(spec) = p.spec.as_mut() {
                        spec.containers.clear();
                        spec.init_containers = None;
                        spec.volumes = None;
                    }
                    if let Some(status) = p.status.as_mut() {
                        status.container_statuses = None;
                        status.init_container_statuses = None;
                    }
                }),
        )
        .default_backoff()
        .touched_objects()
        .boxed();
        (Some(reader), stream)
    } else {
        (None, futures::stream::pending().boxed())
    };
    let controller = Controller::new(api::<TargetGroupBinding>(&client, &settings.namespace), wc)
        .with_config(Config::default().concurrency(settings.concurrency));
    let tgbs = controller.store();
    let (by_svc, by_slice, by_node) = (tgbs.clone(), tgbs.clone(), tgbs.clone());
    let ctx = Arc::new(Ctx {
        events: EventPublisher::new(client.clone(), MANAGER),
        client,
        elbv2,
        services,
        slices,
        nodes,
        pods,
        metrics,
        settings,
        applied: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashMap::new()),
        started: Instant::now(),
        failures: Mutex::new(HashMap::new()),
        bindings: tgbs,
        networking: networking.map(Arc::new),
        names: Mutex::new(HashMap::new()),
    });
    controller
        .watches_stream(svc_stream, move |svc: Service| {
            bindings_of(
                &by_svc,
                &svc.namespace().unwrap_or_default(),
                &svc.name_any(),
            )
        })
        .watches_stream(slice_stream, move |s: EndpointSlice| {
            let svc = s
                .labels()
                .get(SERVICE_NAME_LABEL)
                .cloned()
                .unwrap_or_default();
            bindings_of(&by_slice, &s.namespace().unwrap_or_default(), &svc)
        })
        .watches_stream(node_stream, move |_: Node| {
            by_node
                .state()
                .iter()
                .filter(|t| t.spec.target_type.as_deref() != Some("ip"))
                .map(|t| ObjectRef::from_obj(t.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(pod_stream, |pod: Pod| {
            // The bindings whose gate the pod lists.
            let ns = pod.namespace().unwrap_or_default();
            pod.spec
                .iter()
                .flat_map(|s| s.readiness_gates.iter().flatten())
                .filter_map(|g| g.condition_type.strip_prefix(CONDITION_PREFIX))
                .map(|name| ObjectRef::new(name).within(&ns))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// What of a Node matters to targets: readiness, labels, provider ID.
fn node_fingerprint(node: &Node) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .hash(&mut h);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    ready.hash(&mut h);
    Some(h.finish())
}

async fn reconcile(tgb: Arc<TargetGroupBinding>, ctx: Arc<Ctx>) -> Result<Action, TgbError> {
    let started = Instant::now();
    let result = sync(&tgb, &ctx).await;
    ctx.metrics.record(
        started.elapsed(),
        result.as_ref().err().map(TgbError::category),
    );
    if result.is_ok() {
        ctx.failures
            .lock()
            .expect("failures lock")
            .remove(&key(&tgb));
    }
    result
}

fn error_policy(tgb: Arc<TargetGroupBinding>, error: &TgbError, ctx: Arc<Ctx>) -> Action {
    let k = key(&tgb);
    let n = {
        let mut failures = ctx.failures.lock().expect("failures lock");
        let n = failures.entry(k.clone()).or_insert(0);
        *n += 1;
        *n
    };
    // After a failure the next reconcile reads AWS again instead of trusting the cache.
    ctx.applied.lock().expect("applied lock").remove(&k);
    let delay = ctx.settings.backoff.jittered(n);
    tracing::warn!(binding = %k, error = %error, attempt = n, retry_in_s = delay.as_secs_f32(), "targetgroupbinding reconcile failed");
    let (events, tgb, reason, note) = (
        ctx.events.clone(),
        tgb.clone(),
        error.category(),
        error.to_string(),
    );
    tokio::spawn(async move {
        events
            .publish(tgb.as_ref(), true, reason, "Reconcile", note)
            .await;
    });
    Action::requeue(delay)
}

async fn sync(tgb: &TargetGroupBinding, ctx: &Ctx) -> Result<Action, TgbError> {
    let k = key(tgb);
    let has_finalizer = tgb.finalizers().iter().any(|f| f == TGB_FINALIZER);
    if tgb.metadata.deletion_timestamp.is_some() {
        if has_finalizer {
            cleanup(tgb, ctx).await?;
            set_finalizer(tgb, ctx, false).await?;
        }
        ctx.applied.lock().expect("applied lock").remove(&k);
        ctx.pending.lock().expect("pending lock").remove(&k);
        return Ok(Action::await_change());
    }
    let arn = match target_group_arn(tgb, ctx).await? {
        Some(arn) => arn,
        None => {
            return Err(TgbError::Spec(format!(
                "spec.targetGroupName: no target group named {:?}",
                tgb.spec.target_group_name.as_deref().unwrap_or_default()
            )))
        }
    };
    if !has_finalizer {
        set_finalizer(tgb, ctx, true).await?;
    }
    let previous = ctx
        .applied
        .lock()
        .expect("applied lock")
        .get(&k)
        .cloned()
        .filter(|a| a.arn == arn && a.checked.elapsed() < ctx.settings.sync_period);
    let target_type = match (&tgb.spec.target_type, &previous) {
        (Some(t), _) => TargetType::parse(t)?,
        (None, Some(p)) => p.target_type,
        (None, None) => {
            let info = ctx
                .elbv2
                .target_group_info(&arn)
                .await?
                .ok_or_else(|| TgbError::Spec(format!("target group {arn} not found")))?;
            TargetType::parse(info.target_type_or_default())?
        }
    };
    let wanted = wanted_targets(tgb, target_type, ctx)?;
    // Churn against an applied state is coalesced; a first apply (or one after a failure,
    // restart or resync) goes at once.
    if previous.as_ref().is_some_and(|p| p.targets != wanted) {
        if let Some(wait) = hold_back(&k, &wanted, ctx) {
            return Ok(Action::requeue(wait));
        }
    }
    ctx.pending.lock().expect("pending lock").remove(&k);
    let (registered, checked) = match &previous {
        Some(p) if p.target_type == target_type => (p.targets.clone(), p.checked),
        _ => (
            active(&ctx.elbv2.target_health(&arn).await?),
            Instant::now(),
        ),
    };
    let changes = plan_targets(&wanted, &registered);
    if !changes.is_empty() {
        // New targets first, so traffic always has somewhere to go.
        ctx.elbv2.register_targets(&arn, &changes.register).await?;
        ctx.elbv2
            .deregister_targets(&arn, &changes.deregister)
            .await?;
        ctx.metrics
            .targets_changed(changes.register.len(), changes.deregister.len());
        tracing::info!(binding = %k, registered = changes.register.len(), deregistered = changes.deregister.len(), "targets updated");
    }
    if let Some(net) = &ctx.networking {
        if tgb.spec.networking.is_some() || net.has(&k) {
            net.apply(
                &k,
                tgb.spec.networking.as_ref(),
                target_type == TargetType::Ip,
                &wanted,
                &all_keys(ctx),
            )
            .await?;
        }
    }
    let gates_waiting = if target_type == TargetType::Ip {
        release_gates(tgb, &arn, &wanted, ctx).await?
    } else {
        false
    };
    ctx.applied.lock().expect("applied lock").insert(
        k,
        Applied {
            arn,
            target_type,
            targets: wanted,
            checked,
        },
    );
    let generation = tgb.metadata.generation;
    if generation.is_some() && tgb.status.as_ref().and_then(|s| s.observed_generation) != generation
    {
        let api: Api<TargetGroupBinding> =
            Api::namespaced(ctx.client.clone(), &tgb.namespace().unwrap_or_default());
        api.patch_status(
            &tgb.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"observedGeneration": generation}})),
        )
        .await?;
    }
    Ok(Action::requeue(if gates_waiting {
        ctx.settings.gate_poll
    } else {
        ctx.settings.sync_period
    }))
}

/// Sets the readiness-gate condition of pods whose targets turned healthy; true while some
/// gated pod still waits. No AWS call when no pod waits.
async fn release_gates(
    tgb: &TargetGroupBinding,
    arn: &str,
    wanted: &BTreeSet<TargetRef>,
    ctx: &Ctx,
) -> Result<bool, TgbError> {
    let Some(pods) = &ctx.pods else {
        return Ok(false);
    };
    let ns = tgb.namespace().unwrap_or_default();
    let cond = condition_type(&tgb.name_any());
    let ips: BTreeSet<&str> = wanted.iter().map(|t| t.id.as_str()).collect();
    let all = pods.state();
    let pending: Vec<&Pod> = all
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns.as_str())
                && gate_pending(p, &cond)
                && p.status
                    .as_ref()
                    .and_then(|s| s.pod_ip.as_deref())
                    .is_some_and(|ip| ips.contains(ip))
        })
        .collect();
    if pending.is_empty() {
        return Ok(false);
    }
    let health = ctx.elbv2.target_health(arn).await?;
    let (ready, waiting) = gates_to_set(&pending, &cond, &health);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // Each pod's gate turns True now (a pending gate is not True yet): the transition's time,
    // as upstream records it.
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    for name in ready {
        let patch = serde_json::json!({"status": {"conditions": [
            {"type": cond, "status": "True", "reason": "TargetHealthy",
             "message": "the target is healthy in its target group",
             "lastProbeTime": now, "lastTransitionTime": now}]}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        tracing::info!(binding = %key(tgb), pod = %name, "readiness gate set: target healthy");
    }
    Ok(waiting)
}

/// Whether the changed `wanted` targets of binding `k` should wait (and how long).
fn hold_back(k: &str, wanted: &BTreeSet<TargetRef>, ctx: &Ctx) -> Option<Duration> {
    let now = Instant::now();
    let mut pending = ctx.pending.lock().expect("pending lock");
    let p = pending.entry(k.to_string()).or_insert_with(|| Pending {
        wanted: wanted.clone(),
        since: now,
        last_change: now,
    });
    if &p.wanted != wanted {
        p.wanted = wanted.clone();
        p.last_change = now;
    }
    let at = |t: Instant| t.duration_since(ctx.started);
    coalesce(
        at(now),
        at(p.since),
        at(p.last_change),
        ctx.settings.coalesce,
        ctx.settings.coalesce_max_delay,
    )
}

/// The targets the binding wants now, from the caches.
fn wanted_targets(
    tgb: &TargetGroupBinding,
    target_type: TargetType,
    ctx: &Ctx,
) -> Result<BTreeSet<TargetRef>, TgbError> {
    let ns = tgb.namespace().unwrap_or_default();
    let name = &tgb.spec.service_ref.name;
    let svc = ctx
        .services
        .get(&ObjectRef::new(name).within(&ns))
        .ok_or_else(|| TargetError::ServiceNotFound(format!("{ns}/{name}")))?;
    let port = service_port(&svc, &tgb.spec.service_ref.port)?;
    Ok(match target_type {
        TargetType::Ip => {
            let slices = ctx.slices.state();
            let mine: Vec<&EndpointSlice> = slices
                .iter()
                .filter(|s| {
                    s.namespace().as_deref() == Some(ns.as_str())
                        && s.labels().get(SERVICE_NAME_LABEL) == Some(name)
                })
                .map(|s| s.as_ref())
                .collect();
            let cond = condition_type(&tgb.name_any());
            let held = |pod: &str| {
                ctx.pods.as_ref().is_some_and(|pods| {
                    pods.get(&ObjectRef::new(pod).within(&ns))
                        .is_some_and(|p| registered_while_unready(&p, &cond))
                })
            };
            ip_targets(port, &mine, &held)
        }
        TargetType::Instance => {
            let nodes = ctx.nodes.state();
            let all: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
            instance_targets(&svc, port, &all, tgb.spec.node_selector.as_ref())?
        }
    })
}

/// The binding's target group: `spec.targetGroupARN`, else the ARN of the group named
/// `spec.targetGroupName` (looked up once per name; None when no group has that name).
async fn target_group_arn(tgb: &TargetGroupBinding, ctx: &Ctx) -> Result<Option<String>, TgbError> {
    let arn = tgb.spec.target_group_arn.trim();
    if !arn.is_empty() {
        return Ok(Some(arn.to_string()));
    }
    let Some(name) = tgb
        .spec
        .target_group_name
        .as_deref()
        .filter(|n| !n.is_empty())
    else {
        return Err(TgbError::Spec(
            "spec.targetGroupARN or spec.targetGroupName is required".into(),
        ));
    };
    if let Some(arn) = ctx.names.lock().expect("names lock").get(name) {
        return Ok(Some(arn.clone()));
    }
    let found = ctx.elbv2.target_group(name).await?.map(|g| g.arn);
    if let Some(arn) = &found {
        ctx.names
            .lock()
            .expect("names lock")
            .insert(name.to_string(), arn.clone());
    }
    Ok(found)
}

/// Every binding's key.
fn all_keys(ctx: &Ctx) -> Vec<String> {
    ctx.bindings.state().iter().map(|b| key(b)).collect()
}

/// Deregisters every active target of the binding's group (as upstream does on delete) and
/// drops its networking rules.
async fn cleanup(tgb: &TargetGroupBinding, ctx: &Ctx) -> Result<(), TgbError> {
    if let Some(net) = &ctx.networking {
        net.forget(&key(tgb), &all_keys(ctx)).await?;
    }
    // A binding without a usable target group registered nothing.
    let Ok(Some(arn)) = target_group_arn(tgb, ctx).await else {
        return Ok(());
    };
    let arn = arn.as_str();
    let health = match ctx.elbv2.target_health(arn).await {
        Ok(h) => h,
        Err(CloudError::Rejected { code, .. }) if code == "TargetGroupNotFound" => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let targets: Vec<TargetRef> = active(&health).into_iter().collect();
    ctx.elbv2.deregister_targets(arn, &targets).await?;
    ctx.metrics.targets_changed(0, targets.len());
    tracing::info!(binding = %key(tgb), deregistered = targets.len(), "binding deleted: targets deregistered");
    Ok(())
}

async fn set_finalizer(tgb: &TargetGroupBinding, ctx: &Ctx, present: bool) -> Result<(), TgbError> {
    let mut finalizers: Vec<String> = tgb
        .finalizers()
        .iter()
        .filter(|f| *f != TGB_FINALIZER)
        .cloned()
        .collect();
    if present {
        finalizers.push(TGB_FINALIZER.to_string());
    }
    let api: Api<TargetGroupBinding> =
        Api::namespaced(ctx.client.clone(), &tgb.namespace().unwrap_or_default());
    // The resourceVersion makes the write fail instead of clobbering a concurrent change.
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": tgb.resource_version(),
    }});
    match api
        .patch(
            &tgb.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if !present && s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
