//! The webhooks' view of the cluster: TargetGroupBindings and Services (of `--watch-namespace`,
//! or all) in reflector stores, kept on every replica, the Services stripped to their selectors.
//! The pod webhook reads them instead of asking the API server per admission.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use stratus_kube_kit::store::wait_for_store;
use stratus_serving::ReadyFlag;

use crate::crd::TargetGroupBinding;
use crate::tgb::driver::api;

/// The stores and the tasks feeding them (stopped on drop).
pub struct Caches {
    bindings: Store<TargetGroupBinding>,
    services: Store<Service>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Caches {
    /// Starts watching; `filled` is set once both stores hold their first listing.
    pub fn start(client: &Client, namespace: &Option<String>, filled: ReadyFlag) -> Caches {
        let wc = watcher::Config::default().any_semantic();
        let (bindings, tgb_writer) = reflector::store();
        let tgb_stream = reflector::reflector(
            tgb_writer,
            watcher(api::<TargetGroupBinding>(client, namespace), wc.clone()).modify(
                |b: &mut TargetGroupBinding| {
                    b.metadata.managed_fields = None;
                    b.metadata.annotations = None;
                },
            ),
        )
        .default_backoff()
        .boxed();
        let (services, svc_writer) = reflector::store();
        let svc_stream = reflector::reflector(
            svc_writer,
            // Only the selector is read.
            watcher(api::<Service>(client, namespace), wc).modify(|s: &mut Service| {
                s.metadata.managed_fields = None;
                s.metadata.annotations = None;
                s.metadata.labels = None;
                s.status = None;
                s.spec = Some(ServiceSpec {
                    selector: s.spec.take().and_then(|spec| spec.selector),
                    ..ServiceSpec::default()
                });
            }),
        )
        .default_backoff()
        .boxed();
        let (b, s) = (bindings.clone(), services.clone());
        let tasks = vec![
            tokio::spawn(drain(tgb_stream, "TargetGroupBindings")),
            tokio::spawn(drain(svc_stream, "Services")),
            tokio::spawn(async move {
                if wait_for_store(&b).await && wait_for_store(&s).await {
                    filled.set();
                }
            }),
        ];
        Caches {
            bindings,
            services,
            tasks,
        }
    }

    /// Waits up to `within` for the first listings; whether they are in.
    pub async fn filled(&self, within: Duration) -> bool {
        tokio::time::timeout(within, async {
            wait_for_store(&self.bindings).await && wait_for_store(&self.services).await
        })
        .await
        .unwrap_or(false)
    }

    /// Every cached binding (the decision filters by namespace).
    pub fn bindings(&self) -> Vec<Arc<TargetGroupBinding>> {
        self.bindings.state()
    }

    /// The selector of Service `namespace/name`; `None` when it is not known.
    pub fn selector_of(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let service = self.services.get(&ObjectRef::new(name).within(namespace))?;
        Some(
            service
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .unwrap_or_default(),
        )
    }
}

/// Runs a reflector stream, logging its failures (it retries with backoff).
async fn drain<K>(
    stream: futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    what: &'static str,
) {
    stream
        .for_each(|event| {
            if let Err(e) = event {
                tracing::warn!(error = %e, "webhook cache of {what}: watch failed");
            }
            std::future::ready(())
        })
        .await;
}

impl Drop for Caches {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
    }
}
