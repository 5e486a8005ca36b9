//! The Ingress driver: the Ingresses served here ([`crate::ingress::class`]) are grouped, their
//! annotations read under their class's IngressClassParams, planned by
//! [`crate::ingress::plan::plan_parsed`] and applied to AWS by its child module `aws`; then the
//! finalizer and `status.loadBalancer` of every member. A group with no member left loses its
//! ALB, target groups, bindings and managed group. Invalid annotations or params: a Warning
//! Event, nothing changed. A change of any IngressClass or IngressClassParams reconciles every
//! Ingress (an unchanged plan costs no AWS call).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use stratus_aws_api::subnets::SubnetCache;
use stratus_aws_api::ElbV2Api;
use stratus_kube_kit::EventPublisher;

use crate::crd::IngressClassParams;
use crate::ingress::annotations::{self, IngressAnnotations};
use crate::ingress::class::{namespace_refused, Classes, Served};
use crate::ingress::class_params::namespace_allowed;
use crate::ingress::plan::{group_of, member_name, plan_parsed, GroupId};

mod aws;

use aws::{apply, teardown};

pub use crate::ingress::class::CONTROLLER;
pub use crate::ingress::context::{IngressCtx, IngressError, IngressSettings, FINALIZER};

/// Runs the driver until `shutdown` completes.
pub async fn run(
    client: Client,
    alb: ElbV2Api,
    subnets: Arc<SubnetCache>,
    settings: IngressSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(Api::<Ingress>::all(client.clone()), wc.clone())
        .with_config(Config::default().concurrency(settings.concurrency.max(1)));
    let (classes, class_writer) = reflector::store();
    let class_changes = reflector::reflector(
        class_writer,
        watcher(Api::<IngressClass>::all(client.clone()), wc.clone()),
    )
    .default_backoff()
    .touched_objects()
    .map(|r| r.map(|_| ()));
    let (params, params_writer) = reflector::store();
    let params_changes = reflector::reflector(
        params_writer,
        watcher(Api::<IngressClassParams>::all(client.clone()), wc),
    )
    .default_backoff()
    .touched_objects()
    .map(|r| r.map(|_| ()));
    let ctx = Arc::new(IngressCtx {
        events: EventPublisher::new(client.clone(), "ingress"),
        ingresses: controller.store(),
        classes: Classes {
            classes,
            params,
            legacy: settings.ingress_class.clone(),
        },
        client,
        alb,
        subnets,
        settings,
        locks: Mutex::new(HashMap::new()),
        applied: Mutex::new(HashMap::new()),
    });
    controller
        .reconcile_all_on(
            futures::stream::select(class_changes, params_changes)
                .filter_map(|r| async move { r.ok() }),
        )
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

/// The annotations of a served Ingress read under its class's params, with the namespace
/// selector checked (namespace labels read once per reconcile, only for classes that select).
async fn member_annotations(
    ctx: &IngressCtx,
    ing: &Ingress,
    served: &Served,
    namespaces: &mut HashMap<String, BTreeMap<String, String>>,
) -> Result<IngressAnnotations, Vec<String>> {
    let params = match served {
        Served::Yes(p) => p.clone(),
        Served::Broken(why) => return Err(vec![why.clone()]),
        Served::No => return Err(vec!["not served by this controller".into()]),
    };
    if let Some(selector) = params
        .as_ref()
        .and_then(|p| p.spec.namespace_selector.as_ref())
    {
        let ns = ing.namespace().unwrap_or_default();
        if !namespaces.contains_key(&ns) {
            let labels = Api::<Namespace>::all(ctx.client.clone())
                .get(&ns)
                .await
                .map_err(|e| vec![format!("namespace {ns}: {e}")])?
                .metadata
                .labels
                .unwrap_or_default();
            namespaces.insert(ns.clone(), labels);
        }
        if !namespace_allowed(Some(selector), &namespaces[&ns]).map_err(|e| vec![e])? {
            return Err(vec![namespace_refused(
                &ns,
                &params.as_ref().map(|p| p.name_any()).unwrap_or_default(),
            )]);
        }
    }
    annotations::parse_for(&model_annotations(ing), params.as_ref().map(|p| &p.spec))
}

/// The group of an Ingress whose settings cannot be read (being deleted, it still leaves its
/// group): its params' group, else its own `group.name` annotation, else itself.
fn fallback_group(ing: &Ingress, served: &Served) -> GroupId {
    let params_group = match served {
        Served::Yes(Some(p)) => p.spec.group.as_ref().map(|g| g.name.clone()),
        _ => None,
    };
    let own = model_annotations(ing)
        .get(&format!("{}group.name", annotations::PREFIX))
        .cloned();
    let a = IngressAnnotations {
        group: params_group.or(own),
        ..IngressAnnotations::default()
    };
    group_of(ing, &a)
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
    ctx.classes.ready().await;
    let deleting = ing.metadata.deletion_timestamp.is_some();
    let served = ctx.classes.served(&ing);
    if matches!(served, Served::No) {
        if has_finalizer(&ing) && deleting {
            set_finalizer(&ing, &ctx, false).await?;
        }
        return Ok(Action::await_change());
    }
    let mut namespaces = HashMap::new();
    let group = match member_annotations(&ctx, &ing, &served, &mut namespaces).await {
        Ok(a) => group_of(&ing, &a),
        // Leaving its group must not wait for its settings to be fixed.
        Err(_) if deleting && has_finalizer(&ing) => fallback_group(&ing, &served),
        Err(problems) => {
            warn(&ctx, &ing, problems.join("; ")).await;
            return Ok(Action::await_change());
        }
    };
    tracing::debug!(ingress = %member_name(&ing), group = %group.key(), deleting, "ingress reconcile");
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
    // The members with their settings, this one as it is now (the store may lag behind);
    // another Ingress whose settings are invalid is left out (its own reconcile reports it).
    let mut members: Vec<(Ingress, IngressAnnotations)> = Vec::new();
    let same = |o: &Ingress| o.namespace() == ing.namespace() && o.name_any() == ing.name_any();
    for other in ctx.ingresses.state() {
        if same(&other) || other.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let served = ctx.classes.served(&other);
        if matches!(served, Served::No) {
            continue;
        }
        if let Ok(a) = member_annotations(&ctx, &other, &served, &mut namespaces).await {
            if group_of(&other, &a) == group {
                members.push((other.as_ref().clone(), a));
            }
        }
    }
    if !deleting {
        let own = member_annotations(&ctx, &ing, &served, &mut namespaces).await;
        members.push((ing.as_ref().clone(), own.expect("read above")));
    }
    if members.is_empty() {
        ctx.applied.lock().expect("applied").remove(&group);
        teardown(&ctx, &group).await?;
    } else {
        let parsed: Vec<(&Ingress, IngressAnnotations)> =
            members.iter().map(|(i, a)| (i, a.clone())).collect();
        let spec = match plan_parsed(
            &ctx.settings.cluster,
            &group,
            parsed,
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
        tracing::debug!(group = %group.key(), hostname = %applied.hostname(), "group applied");
        let hostname = applied.hostname().to_string();
        ctx.applied
            .lock()
            .expect("applied")
            .insert(group.clone(), applied);
        // Only members holding the finalizer get a hostname: one whose own reconcile has not
        // added it yet would otherwise look served and could be deleted without cleanup.
        for (m, _) in &members {
            if same(m) || has_finalizer(m) {
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
    crate::ingress::plan::annotations_of(ing)
}

async fn warn(ctx: &IngressCtx, ing: &Ingress, note: String) {
    tracing::warn!(ingress = %member_name(ing), %note, "ingress not applied");
    ctx.events
        .publish(ing, true, "FailedBuildModel", "Reconcile", note)
        .await;
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

/// Every Ingress is reconciled again after this long (later than [`crate::ingress::driver::aws::FRESH`],
/// so the resync reads AWS back).
const RESYNC: Duration = Duration::from_secs(600);
