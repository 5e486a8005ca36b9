//! Fake load balancers: one per Service, with an ingress that may appear later (the provider
//! then asks for a re-sync, as a cloud watcher would) and a knob to stay "pending".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use stratus_cloud::{
    CloudError, Ingress, LoadBalancer, LoadBalancerRequest, ResyncRequests, ServiceKey, ServiceRef,
};

use crate::knobs::Controls;

/// How long a pending load balancer asks the controller to wait.
pub const PENDING_RETRY: Duration = Duration::from_millis(300);

/// One fake load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeLb {
    /// The request it was last ensured with (nodes as of the last target update).
    pub request: LoadBalancerRequest,
    /// Its address; empty until published when addresses are delayed.
    pub ingress: Vec<Ingress>,
}

/// The load-balancer capability of the fake.
#[derive(Debug, Default)]
pub struct FakeLoadBalancers {
    pub(crate) lbs: Mutex<BTreeMap<String, FakeLb>>,
    /// Services whose load balancer answers Pending.
    pub(crate) pending: Mutex<BTreeSet<String>>,
    /// When set, new load balancers get no address until [`crate::FakeCloud::publish_ingress`].
    pub(crate) delay_addresses: Mutex<bool>,
    pub(crate) resync: ResyncRequests,
    pub(crate) controls: Arc<Controls>,
}

fn key_of(s: &ServiceRef) -> String {
    format!("{}/{}", s.namespace, s.name)
}

impl FakeLoadBalancers {
    fn check_pending(&self, key: &str) -> Result<(), CloudError> {
        if self.pending.lock().expect("pending").contains(key) {
            return Err(CloudError::Pending {
                what: format!("load balancer of {key}"),
                retry_after: PENDING_RETRY,
            });
        }
        Ok(())
    }

    /// Gives the load balancer of `key` an address and asks for the Service to be synced again.
    pub(crate) fn publish_ingress(&self, namespace: &str, name: &str, ip: &str) {
        let key = format!("{namespace}/{name}");
        if let Some(lb) = self.lbs.lock().expect("lbs").get_mut(&key) {
            lb.ingress = vec![Ingress {
                hostname: None,
                ip: Some(ip.to_string()),
            }];
        }
        self.resync.request(ServiceKey {
            namespace: namespace.into(),
            name: name.into(),
        });
    }
}

#[async_trait]
impl LoadBalancer for FakeLoadBalancers {
    async fn ensure(&self, request: &LoadBalancerRequest) -> Result<Vec<Ingress>, CloudError> {
        let key = key_of(&request.service);
        self.controls.enter("load_balancer", "ensure", &key).await?;
        self.check_pending(&key)?;
        let delayed = *self.delay_addresses.lock().expect("delay");
        let mut lbs = self.lbs.lock().expect("lbs");
        let lb = lbs.entry(key).or_insert_with(|| FakeLb {
            request: request.clone(),
            ingress: if delayed {
                Vec::new()
            } else {
                vec![Ingress {
                    hostname: Some(format!(
                        "{}.{}.lb.fake.example",
                        request.service.name, request.service.namespace
                    )),
                    ip: None,
                }]
            },
        });
        lb.request = request.clone();
        Ok(lb.ingress.clone())
    }

    async fn update_targets(&self, request: &LoadBalancerRequest) -> Result<bool, CloudError> {
        let key = key_of(&request.service);
        self.controls
            .enter("load_balancer", "update_targets", &key)
            .await?;
        self.check_pending(&key)?;
        let mut lbs = self.lbs.lock().expect("lbs");
        let lb = lbs.get_mut(&key).ok_or_else(|| {
            CloudError::InvalidInput(format!("no load balancer for {key} to update"))
        })?;
        let changed = lb.request.nodes != request.nodes;
        lb.request.nodes = request.nodes.clone();
        Ok(changed)
    }

    async fn ensure_deleted(
        &self,
        _cluster_name: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        let key = key_of(service);
        self.controls
            .enter("load_balancer", "ensure_deleted", &key)
            .await?;
        self.check_pending(&key)?;
        self.lbs.lock().expect("lbs").remove(&key);
        Ok(())
    }

    async fn reap(&self, _cluster_name: &str, live: &[ServiceRef]) -> Result<usize, CloudError> {
        self.controls.enter("load_balancer", "reap", "").await?;
        let live: BTreeSet<String> = live.iter().map(key_of).collect();
        let mut lbs = self.lbs.lock().expect("lbs");
        let before = lbs.len();
        lbs.retain(|k, _| live.contains(k));
        Ok(before - lbs.len())
    }

    fn resync_requests(&self) -> Option<BoxStream<'static, ServiceKey>> {
        Some(self.resync.subscribe())
    }
}
