//! kube-rs driver of the service controller: watch Services, keep their cloud load balancers
//! in step, follow node churn with one coalesced target update per load balancer, and sync a
//! Service again when the provider asks. Decisions are in `plan` and `sync_plan`.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::Client;
use serde_json::json;
use stratus_cloud::{CloudError, LoadBalancer, LoadBalancerRequest, ServiceRef};
use stratus_kube_kit::{wait_for_store, EventPublisher, WatchHealth, WatchSignal};
use stratus_runtime::backoff::Backoff;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::endpoint_trigger::endpoint_changes;
use super::node_trigger::node_changes;
use super::plan::{
    ingress_status_patch, load_balancer_request, plan_service, target_nodes, ServiceAction,
    FINALIZER,
};
use super::sync_plan::{
    answer_error, plan_sync_step, retry_delay, ErrorAnswer, FailureKind, LastEnsure, RetryDelays,
    SyncStep,
};
use crate::metrics::ReconcileMetrics;

/// Reporter name of our Events.
const MANAGER: &str = "service-controller";
/// Delay between a load-balancer deletion and the reaper pass it triggers.
const REAP_AFTER_DELETE: Duration = Duration::from_secs(2);
/// The longest wait between retries after throttling or an outage: once the cloud is back,
/// every waiting Service is retried within this (the rate limiter spaces the calls out).
pub const TRANSIENT_MAX_BACKOFF: Duration = Duration::from_secs(15);

/// Settings of the service controller.
#[derive(Debug, Clone)]
pub struct ServiceControllerConfig {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--concurrent-service-syncs`.
    pub concurrency: u16,
    /// A `spec.loadBalancerClass` that is ours besides "unset".
    pub load_balancer_class: Option<String>,
    /// How often the node set is checked for changes.
    pub node_poll: Duration,
    /// A changed node set must hold still this long before targets are updated (coalescing).
    pub node_quiet: Duration,
    /// Longest a pending node change waits for the set to hold still.
    pub node_max_delay: Duration,
    /// How long after an EndpointSlice change an `externalTrafficPolicy: Local` Service is synced
    /// again, where the provider's targets follow endpoints (kube-proxy's health check catches
    /// up meanwhile).
    pub endpoint_settle: Duration,
    /// A full ensure of every load balancer at least this often (repairs outside changes).
    pub full_resync: Duration,
    /// How often orphaned cloud resources are looked for.
    pub reaper_period: Duration,
    /// Retry delays after a failure that is not throttling or an outage.
    pub backoff: Backoff,
    /// `--min-resync-period`: every Service is synced again after [min, 2·min).
    pub min_resync: Duration,
}

impl Default for ServiceControllerConfig {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".into(),
            concurrency: 1,
            load_balancer_class: None,
            node_poll: Duration::from_millis(250),
            node_quiet: Duration::from_secs(1),
            node_max_delay: Duration::from_secs(10),
            endpoint_settle: Duration::from_secs(1),
            full_resync: Duration::from_secs(600),
            reaper_period: Duration::from_secs(600),
            backoff: Backoff::new(Duration::from_secs(5), Duration::from_secs(300)),
            min_resync: crate::resync::DEFAULT_MIN_RESYNC,
        }
    }
}

impl ServiceControllerConfig {
    fn retry_delays(&self) -> RetryDelays {
        RetryDelays {
            backoff: self.backoff,
            passing: Backoff::new(Duration::from_secs(1), self.backoff.max)
                .capped(TRANSIENT_MAX_BACKOFF),
        }
    }
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The cloud answered with an error.
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// A Kubernetes write failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl ServiceError {
    fn category(&self) -> &'static str {
        match self {
            ServiceError::Cloud(e) => e.category(),
            ServiceError::Kube(_) => "KubernetesAPI",
        }
    }

    fn failure_kind(&self) -> FailureKind {
        match self {
            ServiceError::Kube(kube::Error::Api(s)) if s.code == 409 => FailureKind::Conflict,
            ServiceError::Cloud(CloudError::Throttled { .. } | CloudError::Unavailable { .. }) => {
                FailureKind::Passing
            }
            _ => FailureKind::Other,
        }
    }
}

/// The request a load balancer was last fully ensured with (nodes left out) and when.
struct Applied {
    fingerprint: u64,
    at: Instant,
}

struct Ctx {
    client: Client,
    nodes: Store<Node>,
    lb: Arc<dyn LoadBalancer>,
    events: EventPublisher,
    config: ServiceControllerConfig,
    metrics: ReconcileMetrics,
    applied: Mutex<HashMap<String, Applied>>,
    failures: Mutex<HashMap<String, u32>>,
    /// Services whose load balancer the cloud is still building (no new Ensuring Event).
    pending: Mutex<HashSet<String>>,
    /// Wakes the reaper after a load balancer was deleted (shared cloud resources may be free).
    reap_soon: Arc<Notify>,
}

fn key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or(""),
        svc.metadata.name.as_deref().unwrap_or("")
    )
}

/// Hash of everything in a request except its nodes, plus the Service UID.
fn fingerprint(request: &LoadBalancerRequest) -> u64 {
    let mut without_nodes = request.clone();
    without_nodes.nodes.clear();
    let mut h = DefaultHasher::new();
    format!("{without_nodes:?}").hash(&mut h);
    h.finish()
}

fn service_ref(svc: &Service) -> ServiceRef {
    ServiceRef {
        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Runs the controller until shutdown. Waits for the node cache first: targets computed from
/// an empty cache would deregister every node. `health` follows the Service watch.
pub async fn run(
    client: Client,
    nodes: Store<Node>,
    lb: Arc<dyn LoadBalancer>,
    config: ServiceControllerConfig,
    health: WatchHealth,
    metrics: ReconcileMetrics,
) {
    if !wait_for_store(&nodes).await {
        tracing::error!("node cache closed before it was ready; service controller not started");
        return;
    }
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: nodes.clone(),
        lb: lb.clone(),
        events: EventPublisher::new(client.clone(), MANAGER),
        config: config.clone(),
        metrics,
        applied: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashSet::new()),
        reap_soon: Arc::new(Notify::new()),
    });
    let trigger = node_changes(
        nodes,
        config.node_poll,
        config.node_quiet,
        config.node_max_delay,
    );
    let controller = Controller::new(
        Api::<Service>::all(health.client(client.clone(), "/api/v1/services")),
        watcher::Config::default().any_semantic(),
    )
    .with_config(Config::default().concurrency(config.concurrency));
    let services = controller.store();
    let listed = tokio::spawn({
        let (services, health) = (services.clone(), health.clone());
        async move {
            if wait_for_store(&services).await {
                health.signal(WatchSignal::Listed);
            }
        }
    });
    let reaper = tokio::spawn(reap_forever(
        services,
        lb.clone(),
        config.clone(),
        ctx.reap_soon.clone(),
    ));
    let resyncs = lb
        .resync_requests()
        .unwrap_or_else(|| futures::stream::pending().boxed())
        .map(|key| ObjectRef::<Service>::new(&key.name).within(&key.namespace));
    let endpoint_moves = if lb.targets_follow_endpoints() {
        endpoint_changes(client.clone(), controller.store(), config.endpoint_settle).boxed()
    } else {
        futures::stream::pending().boxed()
    };
    controller
        .reconcile_all_on(futures::stream::select(
            trigger,
            crate::resync::resync_ticks(config.min_resync),
        ))
        .reconcile_on(resyncs)
        .reconcile_on(endpoint_moves)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            if let Err(kube::runtime::controller::Error::QueueError(e)) = &result {
                health.failed(e);
            }
            async {}
        })
        .await;
    reaper.abort();
    listed.abort();
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, ServiceError> {
    let started = Instant::now();
    let result = sync(&svc, &ctx).await;
    ctx.metrics
        .record(started, result.as_ref().err().map(ServiceError::category));
    if result.is_ok() {
        ctx.failures
            .lock()
            .expect("failures lock")
            .remove(&key(&svc));
    }
    result
}

async fn sync(svc: &Service, ctx: &Ctx) -> Result<Action, ServiceError> {
    match plan_service(svc, ctx.config.load_balancer_class.as_deref()) {
        ServiceAction::Ignore => {
            ctx.applied.lock().expect("applied lock").remove(&key(svc));
            Ok(Action::await_change())
        }
        ServiceAction::Cleanup => cleanup(svc, ctx).await,
        ServiceAction::Ensure { add_finalizer } => ensure(svc, add_finalizer, ctx).await,
    }
}

fn service_api(svc: &Service, ctx: &Ctx) -> Api<Service> {
    Api::namespaced(
        ctx.client.clone(),
        svc.metadata.namespace.as_deref().unwrap_or_default(),
    )
}

async fn warn(ctx: &Ctx, svc: &Service, reason: &str, action: &str, note: String) {
    ctx.events.publish(svc, true, reason, action, note).await;
}

async fn note(ctx: &Ctx, svc: &Service, reason: &str, action: &str, note: &str) {
    ctx.events
        .publish(svc, false, reason, action, note.into())
        .await;
}

async fn ensure(svc: &Service, add_finalizer: bool, ctx: &Ctx) -> Result<Action, ServiceError> {
    let k = key(svc);
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let api = service_api(svc, ctx);
    if add_finalizer {
        let mut finalizers = svc.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(FINALIZER.to_string());
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": svc.metadata.resource_version,
        }});
        // Through the status subresource, as upstream: metadata changes are kept there, and the
        // controller needs no write access to Service specs (its bootstrap role has none).
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        // The watch brings the updated Service back; continue from there.
        return Ok(Action::await_change());
    }
    let nodes = target_nodes(ctx.nodes.state().iter().map(|n| n.as_ref()));
    let request = match load_balancer_request(svc, &ctx.config.cluster_name, nodes) {
        Ok(r) => r,
        Err(e) => {
            let text = format!("Error syncing load balancer: {e}");
            warn(
                ctx,
                svc,
                "SyncLoadBalancerFailed",
                "EnsureLoadBalancer",
                text,
            )
            .await;
            return Ok(Action::await_change());
        }
    };
    let fp = fingerprint(&request);
    let has_ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .is_some_and(|i| !i.is_empty());
    let last = ctx
        .applied
        .lock()
        .expect("applied lock")
        .get(&k)
        .map(|a| LastEnsure {
            fingerprint: a.fingerprint,
            age: a.at.elapsed(),
        });
    if plan_sync_step(last, fp, has_ingress, ctx.config.full_resync) == SyncStep::UpdateTargets {
        return update_targets(svc, &request, ctx).await;
    }
    let pending_before = ctx.pending.lock().expect("pending lock").contains(&k);
    if !pending_before {
        note(
            ctx,
            svc,
            "EnsuringLoadBalancer",
            "EnsureLoadBalancer",
            "Ensuring load balancer",
        )
        .await;
    }
    let ingress = match ctx.lb.ensure(&request).await {
        Ok(i) => i,
        Err(e) => return ensure_failed(svc, ctx, e).await,
    };
    ctx.pending.lock().expect("pending lock").remove(&k);
    if let Some(patch) = ingress_status_patch(svc, &ingress) {
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    ctx.applied.lock().expect("applied lock").insert(
        k.clone(),
        Applied {
            fingerprint: fp,
            at: Instant::now(),
        },
    );
    note(
        ctx,
        svc,
        "EnsuredLoadBalancer",
        "EnsureLoadBalancer",
        "Ensured load balancer",
    )
    .await;
    tracing::info!(service = %k, "load balancer ensured");
    Ok(Action::requeue(ctx.config.full_resync))
}

/// Answers a failed ensure as the sync plan says.
async fn ensure_failed(svc: &Service, ctx: &Ctx, e: CloudError) -> Result<Action, ServiceError> {
    let k = key(svc);
    let answer = answer_error(&e);
    if !matches!(answer, ErrorAnswer::LookAgain(_)) {
        ctx.pending.lock().expect("pending lock").remove(&k);
    }
    match answer {
        ErrorAnswer::LookAgain(after) => {
            ctx.pending.lock().expect("pending lock").insert(k.clone());
            tracing::debug!(service = %k, error = %e, retry_in_s = after.as_secs_f32(), "load balancer not ready yet");
            Ok(Action::requeue(after))
        }
        ErrorAnswer::LeaveAlone => {
            tracing::debug!(service = %k, error = %e, "load balancer is another controller's");
            Ok(Action::await_change())
        }
        ErrorAnswer::WarnAndWait | ErrorAnswer::WarnAndRetry => {
            let text = format!("Error syncing load balancer: {e}");
            warn(
                ctx,
                svc,
                "SyncLoadBalancerFailed",
                "EnsureLoadBalancer",
                text,
            )
            .await;
            ctx.applied.lock().expect("applied lock").remove(&k);
            if answer == ErrorAnswer::WarnAndWait {
                // Retrying cannot help; the next change to the Service brings it back.
                return Ok(Action::await_change());
            }
            Err(e.into())
        }
    }
}

async fn update_targets(
    svc: &Service,
    request: &LoadBalancerRequest,
    ctx: &Ctx,
) -> Result<Action, ServiceError> {
    match ctx.lb.update_targets(request).await {
        Ok(true) => {
            let text = format!(
                "Updated load balancer with new hosts ({} targets)",
                request.nodes.len()
            );
            note(ctx, svc, "UpdatedLoadBalancer", "UpdateLoadBalancer", &text).await;
            Ok(Action::requeue(ctx.config.full_resync))
        }
        Ok(false) => {
            tracing::debug!(service = %key(svc), "load balancer targets unchanged");
            Ok(Action::requeue(ctx.config.full_resync))
        }
        Err(CloudError::Pending { retry_after, .. }) => Ok(Action::requeue(retry_after)),
        Err(e) => {
            let text = format!("Error updating load balancer with new hosts: {e}");
            warn(
                ctx,
                svc,
                "UpdateLoadBalancerFailed",
                "UpdateLoadBalancer",
                text,
            )
            .await;
            // The next attempt does a full ensure.
            ctx.applied.lock().expect("applied lock").remove(&key(svc));
            Err(e.into())
        }
    }
}

async fn cleanup(svc: &Service, ctx: &Ctx) -> Result<Action, ServiceError> {
    let k = key(svc);
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let api = service_api(svc, ctx);
    let pending_before = ctx.pending.lock().expect("pending lock").contains(&k);
    if !pending_before {
        note(
            ctx,
            svc,
            "DeletingLoadBalancer",
            "DeleteLoadBalancer",
            "Deleting load balancer",
        )
        .await;
    }
    if let Err(e) = ctx
        .lb
        .ensure_deleted(&ctx.config.cluster_name, &service_ref(svc))
        .await
    {
        if let CloudError::Pending { retry_after, .. } = e {
            ctx.pending.lock().expect("pending lock").insert(k);
            return Ok(Action::requeue(retry_after));
        }
        ctx.pending.lock().expect("pending lock").remove(&k);
        let text = format!("Error deleting load balancer: {e}");
        warn(
            ctx,
            svc,
            "SyncLoadBalancerFailed",
            "DeleteLoadBalancer",
            text,
        )
        .await;
        return Err(e.into());
    }
    ctx.pending.lock().expect("pending lock").remove(&k);
    ctx.applied.lock().expect("applied lock").remove(&k);
    ctx.reap_soon.notify_one();
    note(
        ctx,
        svc,
        "DeletedLoadBalancer",
        "DeleteLoadBalancer",
        "Deleted load balancer",
    )
    .await;
    let finalizers: Vec<String> = svc
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let mut patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": svc.metadata.resource_version,
    }});
    // One write: the finalizer goes and, unless the Service is being deleted, the ingress too.
    if svc.metadata.deletion_timestamp.is_none() && ingress_status_patch(svc, &[]).is_some() {
        patch["status"] = json!({"loadBalancer": {"ingress": null}});
    }
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        // Gone already: nothing left to release.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(service = %k, "load balancer deleted");
    Ok(Action::await_change())
}

fn error_policy(svc: Arc<Service>, error: &ServiceError, ctx: Arc<Ctx>) -> Action {
    let k = key(&svc);
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(k.clone()).or_insert(0);
    *n += 1;
    let delay = retry_delay(error.failure_kind(), *n, ctx.config.retry_delays());
    tracing::warn!(service = %k, error = %error, attempt = *n, retry_in_s = delay.as_secs_f32(), "service sync failed");
    Action::requeue(delay)
}

/// Every `reaper_period`, and shortly after a load balancer was deleted, deletes cloud
/// resources of Services that no longer exist. Only runs on a complete Service cache: an empty
/// cache would make every load balancer look orphaned.
async fn reap_forever(
    services: Store<Service>,
    lb: Arc<dyn LoadBalancer>,
    config: ServiceControllerConfig,
    soon: Arc<Notify>,
) {
    if !wait_for_store(&services).await {
        return;
    }
    let mut tick = tokio::time::interval(config.reaper_period);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = soon.notified() => {
                // Let a burst of deletions finish first: one listing for all of them.
                tokio::time::sleep(REAP_AFTER_DELETE).await;
            }
        }
        let live: Vec<ServiceRef> = services
            .state()
            .iter()
            .filter(|s| {
                matches!(
                    plan_service(s, config.load_balancer_class.as_deref()),
                    ServiceAction::Ensure { .. }
                )
            })
            .map(|s| service_ref(s))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        match lb.reap(&config.cluster_name, &live).await {
            Ok(0) => tracing::debug!("reaper found nothing orphaned"),
            Ok(n) => tracing::info!(reaped = n, "reaped orphaned load balancers"),
            Err(e) => tracing::warn!(error = %e, "reaper failed; will retry next period"),
        }
    }
}
