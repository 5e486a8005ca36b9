//! One Node watch shared by every node controller: a reflector store of slimmed Nodes, the
//! stream of changes that drives the cloud-node controller, and a change signal for the
//! controllers that work over the whole store (route, node-ipam).

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::sync::watch;

use stratus_kube_kit::WatchHealth;

/// Changed Nodes, as the cloud-node controller consumes them.
pub type NodeEvents = BoxStream<'static, Result<Node, watcher::Error>>;

/// A signal that the store changed (a Node was added, modified or deleted, or the watch relisted).
///
/// It carries no Node: a subscriber reads the store after `changed()` returns. Changes made while
/// a subscriber is busy are coalesced into one signal. `changed()` fails once the watch is gone.
pub type NodeChanges = watch::Receiver<u64>;

/// The shared Node watch.
pub struct NodeInformer {
    store: Store<Node>,
    events: Option<NodeEvents>,
    changes: NodeChanges,
    health: WatchHealth,
}

/// Drops what no controller reads (managed fields, image lists) before a Node is cached:
/// kubelet image lists alone can be tens of kilobytes per node.
fn slim(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

impl NodeInformer {
    /// Starts nothing yet: the watch runs while its event stream is polled.
    pub fn new(client: Client) -> Self {
        let (store, writer) = reflector::store();
        let (signal, changes) = watch::channel(0u64);
        let health = WatchHealth::default();
        let observed = health.clone();
        let client = health.client(client, "/api/v1/nodes");
        let events = reflector::reflector(
            writer,
            watcher(Api::<Node>::all(client), watcher::Config::default())
                .default_backoff()
                .modify(slim),
        )
        // The reflector has applied the event to the store by the time it yields it. During a
        // relist the store changes only at `InitDone`.
        .inspect(move |event| {
            observed.observe(event);
            if matches!(
                event,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone)
            ) {
                signal.send_modify(|n| *n = n.wrapping_add(1));
            }
        })
        .applied_objects()
        .boxed();
        Self {
            store,
            events: Some(events),
            changes,
            health,
        }
    }

    /// Whether the cache is listed and its watch healthy (for readiness).
    pub fn health(&self) -> WatchHealth {
        self.health.clone()
    }

    /// The cache every controller reads.
    pub fn store(&self) -> Store<Node> {
        self.store.clone()
    }

    /// A change signal for one more subscriber; its first `changed()` returns at once when the
    /// store changed since the informer was built.
    pub fn subscribe(&self) -> NodeChanges {
        self.changes.clone()
    }

    /// The change stream, for the one controller that drives the watch.
    pub fn take_events(&mut self) -> Option<NodeEvents> {
        self.events.take()
    }

    /// Keeps the watch running when no controller took the change stream; `None` otherwise.
    pub fn unclaimed_watch(mut self) -> Option<impl std::future::Future<Output = ()> + Send> {
        self.events.take().map(|e| e.for_each(|_| async {}))
    }
}
