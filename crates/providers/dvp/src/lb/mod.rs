//! Load balancers for DVP: each tenant LoadBalancer Service becomes a LoadBalancer Service in the
//! parent namespace (see [`spec`]) — or, where the platform offers it, a ServiceWithHealthchecks
//! (see [`swhc`]) whose controller makes that Service — selecting the VMs of the target nodes by
//! a per-LB label the provider puts on them. The parent's own load-balancer implementation gives
//! the Service an address; watches of the managed parent objects ask the service controller to
//! sync the tenant Service the moment it does (no polling, no worker waiting).

pub mod health;
pub mod spec;
pub mod swhc;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use serde_json::json;
use stratus_cloud::{
    CloudError, Ingress, LoadBalancer, LoadBalancerRequest, ResyncRequests, ServiceRef, TargetNode,
};
use stratus_dvp_api::labels::{lb_selector_key, LB_LABEL_VALUE};
use stratus_dvp_api::VirtualMachine;

use crate::metrics::DvpMetrics;
use crate::provider_id::vm_name;
use crate::view::{unavailable, VmView};
use spec::{parent_name, parent_service, plan_labels, tenant_service, MANAGED_LABEL};

/// Field manager of the provider's server-side applies in the parent.
const FIELD_MANAGER: &str = "stratus-dvp-ccm";
/// When the service controller looks again at a Service whose parent Service has no address
/// yet, should no watch event come first (the watch normally asks much sooner).
const INGRESS_RETRY: Duration = Duration::from_secs(30);

/// The DVP load-balancer capability.
pub struct DvpLoadBalancers {
    services: Api<Service>,
    swhcs: Api<DynamicObject>,
    vms: Api<VirtualMachine>,
    view: Arc<VmView>,
    metrics: DvpMetrics,
    resync: ResyncRequests,
    swhc: swhc::Capability,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    swhc_watched: std::sync::atomic::AtomicBool,
}

impl Drop for DvpLoadBalancers {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            task.abort();
        }
    }
}

fn ingress_of(svc: &Service) -> Vec<Ingress> {
    ingress_in(svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()))
}

/// The ingress a ServiceWithHealthchecks reports (`status.loadBalancer`, as a Service's).
fn swhc_ingress_of(object: &DynamicObject) -> Vec<Ingress> {
    let status =
        serde_json::from_value::<LoadBalancerStatus>(object.data["status"]["loadBalancer"].clone())
            .ok();
    ingress_in(status.as_ref())
}

fn ingress_in(status: Option<&LoadBalancerStatus>) -> Vec<Ingress> {
    status
        .and_then(|lb| lb.ingress.as_ref())
        .map(|list| {
            list.iter()
                .map(|i| Ingress {
                    ip: i.ip.clone(),
                    hostname: i.hostname.clone(),
                })
                .filter(|i| i.ip.is_some() || i.hostname.is_some())
                .collect()
        })
        .unwrap_or_default()
}

impl DvpLoadBalancers {
    /// Starts the watch of the managed parent Services in `namespace`.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        view: Arc<VmView>,
        metrics: DvpMetrics,
    ) -> Arc<DvpLoadBalancers> {
        let services = Api::<Service>::namespaced(client.clone(), namespace);
        let resync = ResyncRequests::default();
        let task = tokio::spawn(watch_ingress(
            services.clone(),
            resync.clone(),
            ingress_of,
            |svc: &Service| &svc.metadata,
        ));
        Arc::new(DvpLoadBalancers {
            services,
            swhcs: Api::namespaced_with(client.clone(), namespace, &swhc::resource()),
            vms: Api::namespaced(client.clone(), namespace),
            view,
            metrics,
            resync,
            swhc: swhc::Capability::new(client),
            tasks: Mutex::new(vec![task]),
            swhc_watched: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Starts the watch of the managed ServiceWithHealthchecks objects (once).
    fn watch_swhc(&self) {
        if self
            .swhc_watched
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let task = tokio::spawn(watch_ingress(
            self.swhcs.clone(),
            self.resync.clone(),
            swhc_ingress_of,
            |o: &DynamicObject| &o.metadata,
        ));
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }

    /// Applies the ServiceWithHealthchecks standing in for `desired`; a plain parent Service of
    /// ours from before (not one the platform made for a ServiceWithHealthchecks) goes first.
    async fn ensure_swhc(
        &self,
        name: &str,
        desired: &Service,
        request: &LoadBalancerRequest,
    ) -> Result<Vec<Ingress>, CloudError> {
        self.watch_swhc();
        let existing = self
            .services
            .get_opt(name)
            .await
            .map_err(|e| unavailable("get parent Service", &e))?;
        let ours_plain = existing.is_some_and(|svc| {
            !svc.metadata
                .owner_references
                .unwrap_or_default()
                .iter()
                .any(|o| o.kind == swhc::KIND)
        });
        if ours_plain {
            self.delete_service(name).await?;
        }
        let applied = self
            .swhcs
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&swhc::object(desired, request)),
            )
            .await
            .map_err(|e| {
                self.metrics.request("apply_swhc", "error");
                unavailable("apply parent ServiceWithHealthchecks", &e)
            })?;
        self.metrics.request("apply_swhc", "ok");
        Ok(swhc_ingress_of(&applied))
    }

    async fn delete_service(&self, name: &str) -> Result<(), CloudError> {
        match self.services.delete(name, &DeleteParams::default()).await {
            Ok(_) => self.metrics.request("delete_service", "ok"),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.metrics.request("delete_service", "not_found")
            }
            Err(e) => {
                self.metrics.request("delete_service", "error");
                return Err(unavailable("delete parent Service", &e));
            }
        }
        Ok(())
    }

    /// The VM names behind `nodes` (by providerID, else by the hostname label).
    fn target_vms(&self, nodes: &[TargetNode]) -> BTreeSet<String> {
        nodes
            .iter()
            .filter_map(|node| match vm_name(&node.provider_id) {
                Some(vm) => Some(vm.to_string()),
                None => self
                    .view
                    .cached_by_hostname(&node.name)
                    .first()
                    .map(|vm| vm.name().to_string()),
            })
            .collect()
    }

    /// With `externalTrafficPolicy: Local` (a health-check node port), only the VMs whose
    /// kube-proxy reports a local endpoint; all of `vms` otherwise. Probes run concurrently.
    async fn healthy_vms(
        &self,
        vms: BTreeSet<String>,
        request: &LoadBalancerRequest,
    ) -> BTreeSet<String> {
        let port = match (request.local_traffic_only, request.health_check_node_port) {
            (true, Some(port)) => port,
            _ => return vms,
        };
        let probes = vms.into_iter().map(|vm| async move {
            let ip = self
                .view
                .cached(&vm)
                .and_then(|v| v.ip_address().map(str::to_string));
            let up = match &ip {
                Some(ip) => health::healthy(ip, port).await,
                None => false,
            };
            up.then_some(vm)
        });
        futures::future::join_all(probes)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Labels the VMs of the request's target nodes for `lb` (only the healthy ones under
    /// `externalTrafficPolicy: Local`), unlabels the rest; returns whether anything changed.
    async fn sync_labels(
        &self,
        lb: &str,
        request: &LoadBalancerRequest,
    ) -> Result<bool, CloudError> {
        let key = lb_selector_key(lb);
        let labelled = self.view.labelled(&key);
        let wanted = self
            .healthy_vms(self.target_vms(&request.nodes), request)
            .await;
        let plan = plan_labels(&labelled, &wanted);
        for vm in &plan.add {
            self.label(vm, &key, Some(LB_LABEL_VALUE)).await?;
        }
        for vm in &plan.remove {
            self.label(vm, &key, None).await?;
        }
        Ok(!plan.is_empty())
    }

    async fn label(&self, vm: &str, key: &str, value: Option<&str>) -> Result<(), CloudError> {
        let patch = json!({"metadata": {"labels": {key: value}}});
        match self
            .vms
            .patch(vm, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.metrics.request("label_vm", "ok");
                Ok(())
            }
            // A VM deleted meanwhile needs no label change.
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.metrics.request("label_vm", "not_found");
                Ok(())
            }
            Err(e) => {
                self.metrics.request("label_vm", "error");
                Err(unavailable("label VirtualMachine", &e))
            }
        }
    }
}

/// Follows the managed parent objects (Services, or ServiceWithHealthchecks); asks for a re-sync
/// of the tenant Service whenever one's ingress changes.
async fn watch_ingress<K>(
    objects: Api<K>,
    resync: ResyncRequests,
    ingress_of: fn(&K) -> Vec<Ingress>,
    meta: fn(&K) -> &ObjectMeta,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let config = watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
    let seen: Mutex<HashMap<String, Vec<Ingress>>> = Mutex::new(HashMap::new());
    watcher::watcher(objects, config)
        .default_backoff()
        .for_each(|event| {
            let applied = match event {
                Ok(Event::Apply(svc) | Event::InitApply(svc)) => Some(svc),
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(%error, "DVP parent load-balancer watch failed; retrying");
                    None
                }
            };
            if let Some(object) = applied {
                let name = meta(&object).name.clone().unwrap_or_default();
                let ingress = ingress_of(&object);
                let changed = seen.lock().expect("seen lock").insert(name, ingress.clone())
                    != Some(ingress.clone());
                if changed && !ingress.is_empty() {
                    if let Some(key) = tenant_service(meta(&object)) {
                        tracing::debug!(service = %format!("{}/{}", key.namespace, key.name), "parent load balancer address changed; re-syncing");
                        resync.request(key);
                    }
                }
            }
            futures::future::ready(())
        })
        .await;
}

#[async_trait]
impl LoadBalancer for DvpLoadBalancers {
    async fn ensure(&self, request: &LoadBalancerRequest) -> Result<Vec<Ingress>, CloudError> {
        let desired = parent_service(request, self.services.namespace().unwrap_or_default());
        let name = parent_name(&request.service);
        let ingress = if self.swhc.enabled().await {
            self.ensure_swhc(&name, &desired, request).await?
        } else {
            let applied = self
                .services
                .patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&desired),
                )
                .await
                .map_err(|e| {
                    self.metrics.request("apply_service", "error");
                    unavailable("apply parent Service", &e)
                })?;
            self.metrics.request("apply_service", "ok");
            ingress_of(&applied)
        };
        self.sync_labels(&name, request).await?;
        if ingress.is_empty() {
            return Err(CloudError::Pending {
                what: format!("the address of parent Service {name}"),
                retry_after: INGRESS_RETRY,
            });
        }
        Ok(ingress)
    }

    async fn update_targets(&self, request: &LoadBalancerRequest) -> Result<bool, CloudError> {
        self.sync_labels(&parent_name(&request.service), request)
            .await
    }

    async fn ensure_deleted(&self, _: &str, service: &ServiceRef) -> Result<(), CloudError> {
        let name = parent_name(service);
        // A ServiceWithHealthchecks, if the platform has the kind (404 also when it has not),
        // then the Service (ours, or the one made for the ServiceWithHealthchecks).
        match self.swhcs.delete(&name, &DeleteParams::default()).await {
            Ok(_) => self.metrics.request("delete_swhc", "ok"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                self.metrics.request("delete_swhc", "error");
                return Err(unavailable("delete parent ServiceWithHealthchecks", &e));
            }
        }
        self.delete_service(&name).await?;
        // Deleting is rare: ask the parent (not the cache) which VMs still carry the label.
        let key = lb_selector_key(&name);
        let labelled = self
            .vms
            .list(&ListParams::default().labels(&key))
            .await
            .map_err(|e| unavailable("list labelled VirtualMachines", &e))?;
        self.metrics.request("list_labelled_vms", "ok");
        for vm in labelled.items {
            self.label(vm.name(), &key, None).await?;
        }
        Ok(())
    }

    fn resync_requests(&self) -> Option<BoxStream<'static, stratus_cloud::ServiceKey>> {
        Some(self.resync.subscribe())
    }

    /// `externalTrafficPolicy: Local` targets are the nodes whose kube-proxy reports a local
    /// endpoint (see [`health`]), as Deckhouse's EndpointSlice informer does.
    fn targets_follow_endpoints(&self) -> bool {
        true
    }
}
