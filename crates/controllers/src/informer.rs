//! One Node watch shared by every node controller: a reflector store of slimmed Nodes plus the
//! stream of changes that drives the cloud-node controller.

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

/// Changed Nodes, as the cloud-node controller consumes them.
pub type NodeEvents = BoxStream<'static, Result<Node, watcher::Error>>;

/// The shared Node watch.
pub struct NodeInformer {
    store: Store<Node>,
    events: Option<NodeEvents>,
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
        let events = reflector::reflector(
            writer,
            watcher(Api::<Node>::all(client), watcher::Config::default())
                .default_backoff()
                .modify(slim),
        )
        .applied_objects()
        .boxed();
        Self {
            store,
            events: Some(events),
        }
    }

    /// The cache every controller reads.
    pub fn store(&self) -> Store<Node> {
        self.store.clone()
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
