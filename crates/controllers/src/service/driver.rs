//! kube-rs driver of the service controller: watch Services, keep their cloud load balancers
//! in step, follow node churn with one coalesced target update per load balancer.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Client;
use serde_json::json;
use stratus_cloud::{CloudError, LoadBalancer, LoadBalancerRequest, ServiceRef};
use tokio::sync::Notify;

use super::node_trigger::node_changes;
use super::plan::{
    ingress_status_patch, load_balancer_request, plan_service, target_nodes, ServiceAction,
    FINALIZER,
};
use crate::events::EventPublisher;
use crate::store_ready::wait_for_store;
use crate::watch_health::{WatchHealth, WatchSignal};

/// Reporter name of our Events.
const MANAGER: &str = "service-controller";
/// Delay between a load-balancer deletion and the reaper pass it triggers.
const REAP_AFTER_DELETE: Duration = Duration::from_secs(2);

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
    /// A full ensure of every load balancer at least this often (repairs outside changes).
    pub full_resync: Duration,
    /// How often orphaned cloud resources are looked for.
    pub reaper_period: Duration,
    /// First retry delay after a failure; doubles up to `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
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
            full_resync: Duration::from_secs(600),
            reaper_period: Duration::from_secs(600),
            base_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(300),
        }
    }
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Cloud(#[from] CloudError),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
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
    applied: Mutex<HashMap<String, Applied>>,
    failures: Mutex<HashMap<String, u32>>,
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
) {
    if !wait_for_store(&nodes, Duration::from_secs(1)).await {
        tracing::error!("node cache closed before it was ready; service controller not started");
        return;
    }
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: nodes.clone(),
        lb: lb.clone(),
        events: EventPublisher::new(client.clone(), MANAGER),
        config: config.clone(),
        applied: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
        reap_soon: Arc::new(Notify::new()),
    });
    let trigger = node_changes(
        nodes,
        config.node_poll,
        config.node_quiet,
        config.node_max_delay,
    );
    let controller = Controller::new(
        Api::<Service>::all(health.client(client, "/api/v1/services")),
        watcher::Config::default().any_semantic(),
    )
    .with_config(Config::default().concurrency(config.concurrency));
    let services = controller.store();
    let listed = tokio::spawn({
        let (services, health) = (services.clone(), health.clone());
        async move {
            if wait_for_store(&services, Duration::from_secs(1)).await {
                health.signal(WatchSignal::Listed);
            }
        }
    });
    let reaper = tokio::spawn(reap_forever(
        services,
        lb,
        config.clone(),
        ctx.reap_soon.clone(),
    ));
    controller
        .reconcile_all_on(trigger)
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
    let action = plan_service(&svc, ctx.config.load_balancer_class.as_deref());
    let result = match action {
        ServiceAction::Ignore => {
            ctx.applied.lock().expect("applied lock").remove(&key(&svc));
            return Ok(Action::await_change());
        }
        ServiceAction::Cleanup => cleanup(&svc, &ctx).await,
        ServiceAction::Ensure { add_finalizer } => ensure(&svc, add_finalizer, &ctx).await,
    };
    if result.is_ok() {
        ctx.failures
            .lock()
            .expect("failures lock")
            .remove(&key(&svc));
    }
    result
}

async fn ensure(svc: &Service, add_finalizer: bool, ctx: &Ctx) -> Result<Action, ServiceError> {
    let k = key(svc);
    let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
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
            let note = format!("Error syncing load balancer: {e}");
            ctx.events
                .publish(
                    svc,
                    true,
                    "SyncLoadBalancerFailed",
                    "EnsureLoadBalancer",
                    note,
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
    let current = ctx
        .applied
        .lock()
        .expect("applied lock")
        .get(&k)
        .is_some_and(|a| a.fingerprint == fp && a.at.elapsed() < ctx.config.full_resync);
    if current && has_ingress {
        return update_targets(svc, &request, ctx).await;
    }
    ctx.events
        .publish(
            svc,
            false,
            "EnsuringLoadBalancer",
            "EnsureLoadBalancer",
            "Ensuring load balancer".into(),
        )
        .await;
    let ingress = match ctx.lb.ensure(&request).await {
        Ok(i) => i,
        Err(CloudError::ImplementedElsewhere(why)) => {
            tracing::debug!(service = %k, why, "load balancer is another controller's");
            return Ok(Action::await_change());
        }
        Err(e) => {
            let note = format!("Error syncing load balancer: {e}");
            ctx.events
                .publish(
                    svc,
                    true,
                    "SyncLoadBalancerFailed",
                    "EnsureLoadBalancer",
                    note,
                )
                .await;
            ctx.applied.lock().expect("applied lock").remove(&k);
            if matches!(e, CloudError::InvalidInput(_)) {
                // Retrying cannot help; the next change to the Service brings it back.
                return Ok(Action::await_change());
            }
            return Err(e.into());
        }
    };
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
    ctx.events
        .publish(
            svc,
            false,
            "EnsuredLoadBalancer",
            "EnsureLoadBalancer",
            "Ensured load balancer".into(),
        )
        .await;
    tracing::info!(service = %k, "load balancer ensured");
    Ok(Action::requeue(ctx.config.full_resync))
}

async fn update_targets(
    svc: &Service,
    request: &LoadBalancerRequest,
    ctx: &Ctx,
) -> Result<Action, ServiceError> {
    match ctx.lb.update_targets(request).await {
        Ok(true) => {
            ctx.events
                .publish(
                    svc,
                    false,
                    "UpdatedLoadBalancer",
                    "UpdateLoadBalancer",
                    format!(
                        "Updated load balancer with new hosts ({} targets)",
                        request.nodes.len()
                    ),
                )
                .await;
            Ok(Action::requeue(ctx.config.full_resync))
        }
        Ok(false) => Ok(Action::requeue(ctx.config.full_resync)),
        Err(e) => {
            ctx.events
                .publish(
                    svc,
                    true,
                    "UpdateLoadBalancerFailed",
                    "UpdateLoadBalancer",
                    format!("Error updating load balancer with new hosts: {e}"),
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
    let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    ctx.events
        .publish(
            svc,
            false,
            "DeletingLoadBalancer",
            "DeleteLoadBalancer",
            "Deleting load balancer".into(),
        )
        .await;
    if let Err(e) = ctx
        .lb
        .ensure_deleted(&ctx.config.cluster_name, &service_ref(svc))
        .await
    {
        ctx.events
            .publish(
                svc,
                true,
                "SyncLoadBalancerFailed",
                "DeleteLoadBalancer",
                format!("Error deleting load balancer: {e}"),
            )
            .await;
        return Err(e.into());
    }
    ctx.applied.lock().expect("applied lock").remove(&k);
    ctx.reap_soon.notify_one();
    ctx.events
        .publish(
            svc,
            false,
            "DeletedLoadBalancer",
            "DeleteLoadBalancer",
            "Deleted load balancer".into(),
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

/// First retry delay after a throttled or unavailable cloud (doubling per failure).
const TRANSIENT_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries after throttling or an outage: once AWS is back, every
/// waiting Service is retried within this (the rate limiter spaces the calls out).
pub const TRANSIENT_MAX_BACKOFF: Duration = Duration::from_secs(15);

fn error_policy(svc: Arc<Service>, error: &ServiceError, ctx: Arc<Ctx>) -> Action {
    let k = key(&svc);
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(k.clone()).or_insert(0);
    *n += 1;
    let conflict = matches!(error, ServiceError::Kube(kube::Error::Api(s)) if s.code == 409);
    // Throttling and outages pass: retry sooner (the AWS rate limiter already spaces the calls
    // out), with jitter so Services that failed together do not retry together.
    let passing = matches!(
        error,
        ServiceError::Cloud(CloudError::Throttled { .. } | CloudError::Unavailable { .. })
    );
    let delay = if conflict {
        Duration::from_millis(200)
    } else if passing {
        let cap = TRANSIENT_BACKOFF
            .saturating_mul(1u32 << (*n - 1).min(16))
            .min(ctx.config.max_backoff.min(TRANSIENT_MAX_BACKOFF));
        cap.mul_f64(0.5 + rand::random::<f64>() / 2.0)
    } else {
        ctx.config
            .base_backoff
            .saturating_mul(1u32 << (*n - 1).min(16))
            .min(ctx.config.max_backoff)
    };
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
    if !wait_for_store(&services, Duration::from_secs(1)).await {
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
