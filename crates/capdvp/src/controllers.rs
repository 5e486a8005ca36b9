//! Wiring of the two controllers: watches (with caches) of the management cluster's
//! DeckhouseMachines, DeckhouseClusters, Machines and Clusters and of the parent's VMs, disks and
//! VMBDAs; every parent object wakes the DeckhouseMachine its labels name (a VMBDA the machine
//! of its VM), a Machine the DeckhouseMachine it references, a Cluster every DeckhouseMachine
//! of it. DeckhouseMachines trigger on spec, metadata and deletion changes only, never on the
//! status capdvp writes itself.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};

use crate::api::capi::CLUSTER_NAME_LABEL;
use crate::api::{Cluster, DeckhouseCluster, DeckhouseMachine, Machine};
use crate::cluster::{self, ClusterContext};
use crate::machine::{self, Caches, Context, Settings};
use crate::metrics::Metrics;
use crate::names;
use crate::parent::Parent;
use stratus_kube_kit::events::EventPublisher;

/// Watch retries: 250 ms doubling to at most 4 s (client-go's reflector retries within a
/// second; kube's default backoff reaches 30 s, so a parent back from an outage would be seen
/// up to half a minute late), jitter-free, reset after every success.
#[derive(Debug, Clone)]
struct QuickBackoff {
    next: Duration,
}

impl Default for QuickBackoff {
    fn default() -> Self {
        QuickBackoff {
            next: Duration::from_millis(250),
        }
    }
}

impl Iterator for QuickBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(4));
        Some(now)
    }
}

impl Backoff for QuickBackoff {
    fn reset(&mut self) {
        *self = QuickBackoff::default();
    }
}

/// Cached objects keep no `managedFields` (never read; about half of a VM's size).
fn forget_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// A watched, cached kind: the cache and the stream of changed objects driving it.
fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .backoff(QuickBackoff::default())
        .modify(forget_managed_fields)
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// What triggers a DeckhouseMachine's reconcile: everything but its status.
fn machine_trigger(dm: &DeckhouseMachine) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let m = &dm.metadata;
    m.generation.hash(&mut h);
    m.deletion_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut h);
    m.finalizers.hash(&mut h);
    m.labels.hash(&mut h);
    m.owner_references
        .iter()
        .flatten()
        .map(|o| (&o.uid, &o.name))
        .collect::<Vec<_>>()
        .hash(&mut h);
    Some(h.finish())
}

fn machine_of_parent(
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<ObjectRef<DeckhouseMachine>> {
    names::machine_of(labels).map(|(ns, name)| ObjectRef::new(&name).within(&ns))
}

/// The management-cluster scope: every namespace, or one.
pub fn mgmt_api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the controllers are made of.
pub struct Parts {
    /// The management cluster.
    pub mgmt: kube::Client,
    /// The parent cluster.
    pub parent: Parent,
    /// Reconciler settings.
    pub settings: Settings,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Events on DeckhouseMachines.
    pub events: EventPublisher,
}

/// Runs both controllers until `stop` completes; `on_synced` runs once every cache listed.
pub async fn run(
    parts: Parts,
    namespace: Option<&str>,
    concurrency: u16,
    watch_filter: Option<&str>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
    on_synced: impl FnOnce() + Send + 'static,
) {
    let stop = futures::FutureExt::shared(Box::pin(stop));
    let Parts {
        mgmt,
        parent,
        settings,
        metrics,
        events,
    } = parts;
    let (machines, machine_stream) = cached(
        mgmt_api::<Machine>(&mgmt, namespace),
        watcher::Config::default(),
    );
    let (clusters, cluster_stream) = cached(
        mgmt_api::<Cluster>(&mgmt, namespace),
        watcher::Config::default(),
    );
    let selector = watcher::Config::default().labels(names::MACHINE_LABEL);
    let (vms, vm_stream) = cached(
        Api::<VirtualMachine>::namespaced(parent.client().clone(), parent.namespace()),
        selector.clone(),
    );
    let (disks, disk_stream) = cached(
        Api::<VirtualDisk>::namespaced(parent.client().clone(), parent.namespace()),
        selector,
    );
    let (attachments, attachment_stream) = cached(
        Api::<VirtualMachineBlockDeviceAttachment>::namespaced(
            parent.client().clone(),
            parent.namespace(),
        ),
        watcher::Config::default(),
    );
    let ctx = Arc::new(Context {
        mgmt: mgmt.clone(),
        parent,
        caches: Caches {
            machines,
            clusters,
            vms: vms.clone(),
            disks,
            attachments,
        },
        settings,
        metrics: metrics.clone(),
        events,
    });
    let cluster_ctx = ClusterContext {
        mgmt: mgmt.clone(),
        metrics,
    };

    let filtered = watch_filter_config(watch_filter);
    let (dm_store, dm_writer) = reflector::store();
    let dm_stream = watcher(
        mgmt_api::<DeckhouseMachine>(&mgmt, namespace),
        filtered.clone(),
    )
    .backoff(QuickBackoff::default())
    .modify(forget_managed_fields)
    .reflect(dm_writer)
    .applied_objects()
    .predicate_filter(machine_trigger, Default::default());
    let by_cluster = dm_store.clone();
    let vms_for_vmbda = vms.clone();
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    let machine_controller = Controller::for_stream(dm_stream, dm_store.clone())
        .with_config(config.clone())
        .watches_stream(machine_stream, |m: Machine| {
            let ns = m.metadata.namespace.clone().unwrap_or_default();
            infra_ref(&m).map(|name| ObjectRef::new(&name).within(&ns))
        })
        .watches_stream(cluster_stream, move |c: Cluster| {
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            let name = c.metadata.name.clone().unwrap_or_default();
            by_cluster
                .state()
                .into_iter()
                .filter(|dm| {
                    dm.metadata.namespace.as_deref() == Some(ns.as_str())
                        && dm
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(CLUSTER_NAME_LABEL))
                            == Some(&name)
                })
                .map(|dm| ObjectRef::from_obj(dm.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(vm_stream, |vm: VirtualMachine| {
            machine_of_parent(vm.metadata.labels.as_ref())
        })
        .watches_stream(disk_stream, |d: VirtualDisk| {
            machine_of_parent(d.metadata.labels.as_ref())
        })
        .watches_stream(
            attachment_stream,
            move |a: VirtualMachineBlockDeviceAttachment| {
                let ns = a.metadata.namespace.clone().unwrap_or_default();
                vms_for_vmbda
                    .get(&ObjectRef::new(&a.spec.virtual_machine_name).within(&ns))
                    .and_then(|vm| machine_of_parent(vm.metadata.labels.as_ref()))
            },
        )
        .graceful_shutdown_on(stop.clone())
        .run(machine::reconcile, machine::error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));

    let cluster_controller =
        Controller::new(mgmt_api::<DeckhouseCluster>(&mgmt, namespace), filtered)
            .with_config(config)
            .graceful_shutdown_on(stop.clone())
            .run(
                cluster::reconcile,
                cluster::error_policy,
                Arc::new(cluster_ctx),
            )
            .for_each(|_| futures::future::ready(()));

    let synced = {
        let ctx = ctx.clone();
        async move {
            while ctx.caches.wait_synced().await.is_err() {}
            on_synced();
        }
    };
    tokio::join!(machine_controller, cluster_controller, synced);
}

/// Cluster API's label of `--watch-filter`: only objects whose label has the flag's value are
/// reconciled.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

/// The watch of DeckhouseMachines and DeckhouseClusters under `--watch-filter` (all when unset
/// or empty).
pub fn watch_filter_config(filter: Option<&str>) -> watcher::Config {
    match filter.filter(|f| !f.is_empty()) {
        Some(value) => watcher::Config::default().labels(&format!("{WATCH_FILTER_LABEL}={value}")),
        None => watcher::Config::default(),
    }
}

/// The DeckhouseMachine a Machine's `spec.infrastructureRef` names.
fn infra_ref(m: &Machine) -> Option<String> {
    m.spec
        .infrastructure_ref
        .as_ref()
        .filter(|r| r.kind == "DeckhouseMachine")
        .map(|r| r.name.clone())
}
