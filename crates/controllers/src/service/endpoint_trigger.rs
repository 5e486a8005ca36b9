//! EndpointSlice changes of `externalTrafficPolicy: Local` load-balancer Services as settled
//! re-sync requests, for providers whose targets follow where endpoints run (see
//! [`stratus_cloud::LoadBalancer::targets_follow_endpoints`]). A metadata-only watch: the slices'
//! contents are never held, only which Service they belong to.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio::sync::mpsc;

/// The label naming an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The Service (namespace, name) an EndpointSlice belongs to.
pub fn owning_service(slice: &ObjectMeta) -> Option<(String, String)> {
    let name = slice.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some((slice.namespace.clone()?, name.clone()))
}

/// Whether `svc` is a LoadBalancer Service whose traffic stays on nodes with a local endpoint.
pub fn follows_local_endpoints(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|spec| {
        spec.type_.as_deref() == Some("LoadBalancer")
            && spec.external_traffic_policy.as_deref() == Some("Local")
    })
}

/// The Services to sync again as their endpoints move: each one `settle` after the first change
/// of a burst (kube-proxy needs that moment to update its health check), a Service already
/// waiting is not queued twice. Services come from `services`, the controller's own cache.
pub fn endpoint_changes(
    client: Client,
    services: Store<Service>,
    settle: Duration,
) -> impl Stream<Item = ObjectRef<Service>> {
    let (tx, rx) = mpsc::unbounded_channel::<ObjectRef<Service>>();
    tokio::spawn(async move {
        let waiting = Arc::new(Mutex::new(HashSet::new()));
        let slices = watcher(
            Api::<PartialObjectMeta<EndpointSlice>>::all(client),
            watcher::Config::default().labels(SERVICE_NAME_LABEL),
        )
        .default_backoff()
        .touched_objects();
        futures::pin_mut!(slices);
        while let Some(event) = slices.next().await {
            if tx.is_closed() {
                return;
            }
            let slice = match event {
                Ok(slice) => slice,
                Err(e) => {
                    tracing::debug!(error = %e, "EndpointSlice watch error (retrying)");
                    continue;
                }
            };
            let Some((namespace, name)) = owning_service(&slice.metadata) else {
                continue;
            };
            let key = ObjectRef::<Service>::new(&name).within(&namespace);
            if !services
                .get(&key)
                .is_some_and(|svc| follows_local_endpoints(&svc))
            {
                continue;
            }
            if !waiting.lock().expect("waiting lock").insert(key.clone()) {
                continue;
            }
            let (tx, waiting) = (tx.clone(), waiting.clone());
            tokio::spawn(async move {
                tokio::time::sleep(settle).await;
                waiting.lock().expect("waiting lock").remove(&key);
                let _ = tx.send(key);
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|k| (k, rx)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ServiceSpec;

    #[test]
    fn a_slice_belongs_to_the_service_its_label_names() {
        let mut meta = ObjectMeta {
            namespace: Some("shop".into()),
            labels: Some(BTreeMap::from([(
                SERVICE_NAME_LABEL.to_string(),
                "web".to_string(),
            )])),
            ..Default::default()
        };
        assert_eq!(
            owning_service(&meta),
            Some(("shop".to_string(), "web".to_string()))
        );
        meta.labels = Some(BTreeMap::new());
        assert_eq!(owning_service(&meta), None);
    }

    #[test]
    fn only_local_load_balancers_follow_endpoints() {
        let svc = |type_: &str, policy: Option<&str>| Service {
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                external_traffic_policy: policy.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(follows_local_endpoints(&svc("LoadBalancer", Some("Local"))));
        assert!(!follows_local_endpoints(&svc(
            "LoadBalancer",
            Some("Cluster")
        )));
        assert!(!follows_local_endpoints(&svc("LoadBalancer", None)));
        assert!(!follows_local_endpoints(&svc("NodePort", Some("Local"))));
        assert!(!follows_local_endpoints(&Service::default()));
    }
}
