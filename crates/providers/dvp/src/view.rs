//! The shared view of the tenant's VirtualMachines: one watch of the parent namespace feeding a
//! reflector store; every instance question is answered from it. Only an answer of "no such VM"
//! is confirmed with the parent directly (a cache that missed an event must not delete a Node),
//! by one listing of the namespace shared by every miss of the moment (not one request per VM),
//! and a parent that cannot be reached makes that answer an error, never "gone".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use stratus_cloud::CloudError;
use stratus_dvp_api::labels::HOSTNAME;
use stratus_dvp_api::VirtualMachine;
use tokio::sync::watch;

use crate::metrics::{DvpMetrics, EventLabels};

/// How long a question waits for the first listing before asking the parent directly.
pub const SYNC_WAIT: Duration = Duration::from_secs(10);

/// How long one listing answers for the VMs the watch cache lacked: long enough for the
/// node-lifecycle pass (and the node updates) that asked for it, short enough that no later
/// question relies on it.
pub const CONFIRMED_FOR: Duration = Duration::from_secs(3);

/// One listing of the namespace, taken to confirm VMs the watch cache lacked.
struct Confirmed {
    at: tokio::time::Instant,
    vms: Arc<HashMap<String, Arc<VirtualMachine>>>,
}

/// The watch cache of the namespace's VMs.
pub struct VmView {
    api: Api<VirtualMachine>,
    namespace: String,
    store: Store<VirtualMachine>,
    synced: watch::Receiver<bool>,
    /// True once the first listing finished or the watch failed (start-up questions stop waiting).
    settled: watch::Receiver<bool>,
    metrics: DvpMetrics,
    task: tokio::task::JoinHandle<()>,
    confirmed: tokio::sync::Mutex<Option<Confirmed>>,
}

impl Drop for VmView {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VmView {
    /// Starts the watch (it lists first, then follows changes, re-listing after errors with
    /// backoff).
    pub fn start(client: kube::Client, namespace: &str, metrics: DvpMetrics) -> Arc<VmView> {
        let api = Api::<VirtualMachine>::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let (synced_tx, synced) = watch::channel(false);
        let (settled_tx, settled) = watch::channel(false);
        let stream = reflector::reflector(
            writer,
            watcher::watcher(api.clone(), watcher::Config::default()).default_backoff(),
        );
        let events = metrics.clone();
        let counted = store.clone();
        let task = tokio::spawn(async move {
            stream
                .for_each(|event| {
                    let kind = match &event {
                        Ok(Event::Apply(_)) => "apply",
                        Ok(Event::Delete(_)) => "delete",
                        Ok(Event::InitDone) => {
                            let _ = synced_tx.send(true);
                            let _ = settled_tx.send(true);
                            "relist"
                        }
                        Ok(Event::Init | Event::InitApply(_)) => return futures::future::ready(()),
                        Err(error) => {
                            let _ = settled_tx.send(true);
                            tracing::warn!(%error, "DVP VirtualMachine watch failed; retrying");
                            "error"
                        }
                    };
                    events
                        .watch_events
                        .get_or_create(&EventLabels { kind })
                        .inc();
                    events.cached_vms.set(counted.state().len() as i64);
                    futures::future::ready(())
                })
                .await;
        });
        Arc::new(VmView {
            api,
            namespace: namespace.to_string(),
            store,
            synced,
            settled,
            metrics,
            task,
            confirmed: tokio::sync::Mutex::new(None),
        })
    }

    /// Completes once the first listing is in the cache.
    pub async fn wait_until_synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|s| *s).await;
    }

    /// The cached VM called `name`.
    pub fn cached(&self, name: &str) -> Option<Arc<VirtualMachine>> {
        self.store
            .get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// The cached VMs labelled with `hostname` (a node name).
    pub fn cached_by_hostname(&self, hostname: &str) -> Vec<Arc<VirtualMachine>> {
        self.store
            .state()
            .into_iter()
            .filter(|vm| vm.label(HOSTNAME) == Some(hostname))
            .collect()
    }

    /// Names of the cached VMs carrying the label `key` (any value).
    pub fn labelled(&self, key: &str) -> std::collections::BTreeSet<String> {
        self.store
            .state()
            .into_iter()
            .filter(|vm| vm.label(key).is_some())
            .map(|vm| vm.name().to_string())
            .collect()
    }

    /// Waits (at most [`SYNC_WAIT`]) for the first listing, so that questions asked at start-up
    /// are answered by the cache rather than by one parent request each; stops waiting as soon
    /// as the watch fails (an unreachable parent is then reported by the direct request).
    async fn settle(&self) {
        if !*self.settled.borrow() {
            let mut settled = self.settled.clone();
            let _ = tokio::time::timeout(SYNC_WAIT, settled.wait_for(|s| *s)).await;
        }
    }

    /// When any of the VMs `names` is missing from the watch cache, confirms them all with one
    /// listing of the namespace (see [`VmView::vm`]); makes no request when the cache holds
    /// them all.
    pub async fn confirm(&self, names: &[&str]) -> Result<(), CloudError> {
        self.settle().await;
        if names.iter().all(|name| self.cached(name).is_some()) {
            return Ok(());
        }
        self.listing().await.map(drop)
    }

    /// The VMs of the namespace as the parent lists them now: one listing serves every question
    /// asked while it runs and for [`CONFIRMED_FOR`] after (single flight), so that misses of
    /// the watch cache cost one request together, not one each.
    async fn listing(&self) -> Result<Arc<HashMap<String, Arc<VirtualMachine>>>, CloudError> {
        let mut confirmed = self.confirmed.lock().await;
        if let Some(recent) = confirmed
            .as_ref()
            .filter(|c| c.at.elapsed() < CONFIRMED_FOR)
        {
            return Ok(recent.vms.clone());
        }
        match self.api.list(&ListParams::default()).await {
            Ok(list) => {
                self.metrics.request("list_vms", "ok");
                let vms: Arc<HashMap<_, _>> = Arc::new(
                    list.items
                        .into_iter()
                        .map(|vm| (vm.name().to_string(), Arc::new(vm)))
                        .collect(),
                );
                *confirmed = Some(Confirmed {
                    at: tokio::time::Instant::now(),
                    vms: vms.clone(),
                });
                Ok(vms)
            }
            Err(e) => {
                self.metrics.request("list_vms", "error");
                Err(unavailable("list VirtualMachines", &e))
            }
        }
    }

    /// The VM called `name`, from the watch cache, else from a listing of the parent (shared
    /// with every other miss of the moment): `Ok(None)` only when the parent's listing lacks it.
    pub async fn vm(&self, name: &str) -> Result<Option<Arc<VirtualMachine>>, CloudError> {
        self.settle().await;
        if let Some(vm) = self.cached(name) {
            return Ok(Some(vm));
        }
        Ok(self.listing().await?.get(name).cloned())
    }

    /// The VMs labelled with `hostname`, asking the parent when the cache has none.
    pub async fn vms_by_hostname(
        &self,
        hostname: &str,
    ) -> Result<Vec<Arc<VirtualMachine>>, CloudError> {
        self.settle().await;
        let cached = self.cached_by_hostname(hostname);
        if !cached.is_empty() {
            return Ok(cached);
        }
        let params = ListParams::default().labels(&format!("{HOSTNAME}={hostname}"));
        match self.api.list(&params).await {
            Ok(list) => {
                let outcome = if list.items.is_empty() {
                    "not_found"
                } else {
                    "ok"
                };
                self.metrics.request("list_vms_by_hostname", outcome);
                Ok(list.items.into_iter().map(Arc::new).collect())
            }
            Err(e) => {
                self.metrics.request("list_vms_by_hostname", "error");
                Err(unavailable("list VirtualMachines", &e))
            }
        }
    }
}

/// A parent-cluster failure as a cloud error (never "not found").
pub fn unavailable(operation: &str, error: &kube::Error) -> CloudError {
    match error {
        kube::Error::Api(status) if status.code == 401 || status.code == 403 => {
            CloudError::Unauthorized {
                operation: operation.into(),
                message: status.message.clone(),
            }
        }
        kube::Error::Api(status) if status.code == 429 => CloudError::Throttled {
            operation: operation.into(),
            message: status.message.clone(),
        },
        other => CloudError::Unavailable {
            operation: operation.into(),
            message: other.to_string(),
        },
    }
}
