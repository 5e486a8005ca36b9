//! The fake cloud: its capabilities (each may be switched off with a reason), and the handles a
//! test drives it with.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stratus_cloud::{
    Capability, Cloud, InstancesV2, LoadBalancer, ReadinessGate, Route, Routes, Unsupported,
};

use crate::instances::{FakeInstance, FakeInstances, InstanceState};
use crate::knobs::{Call, Controls, Knob};
use crate::load_balancers::{FakeLb, FakeLoadBalancers};
use crate::routes::FakeRoutes;

/// An in-memory cloud.
#[derive(Debug)]
pub struct FakeCloud {
    controls: Arc<Controls>,
    instances: Arc<FakeInstances>,
    load_balancers: Arc<FakeLoadBalancers>,
    routes: Arc<FakeRoutes>,
    unsupported: Mutex<BTreeMap<&'static str, String>>,
}

impl Default for FakeCloud {
    fn default() -> Self {
        let controls = Arc::new(Controls::default());
        FakeCloud {
            instances: Arc::new(FakeInstances {
                all: Mutex::new(BTreeMap::new()),
                controls: controls.clone(),
                region: "fake-region-1".into(),
            }),
            load_balancers: Arc::new(FakeLoadBalancers {
                controls: controls.clone(),
                ..FakeLoadBalancers::default()
            }),
            routes: Arc::new(FakeRoutes {
                tables: Mutex::new(BTreeMap::from([("rt-main".to_string(), Vec::new())])),
                controls: controls.clone(),
            }),
            controls,
            unsupported: Mutex::new(BTreeMap::new()),
        }
    }
}

impl FakeCloud {
    /// A cloud with every capability, no instances and one empty route table `rt-main`.
    pub fn new() -> Arc<FakeCloud> {
        Arc::new(FakeCloud::default())
    }

    /// Adds (or replaces) an instance.
    pub fn add_instance(&self, instance: FakeInstance) {
        self.instances
            .all
            .lock()
            .expect("instances")
            .insert(instance.id.clone(), instance);
    }

    /// Changes the state of instance `id`.
    pub fn set_state(&self, id: &str, state: InstanceState) {
        if let Some(i) = self.instances.all.lock().expect("instances").get_mut(id) {
            i.state = state;
        }
    }

    /// Switches a capability (`instances`, `load_balancer`, `routes`) off, with the reason the
    /// provider gives.
    pub fn unsupported(&self, capability: &'static str, reason: &str) {
        self.unsupported
            .lock()
            .expect("unsupported")
            .insert(capability, reason.into());
    }

    /// Sets how a capability misbehaves.
    pub fn set_knob(&self, capability: &'static str, knob: Knob) {
        self.controls.set(capability, knob);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.controls.calls()
    }

    /// How many calls of `method` were made.
    pub fn count(&self, method: &str) -> usize {
        self.controls.count(method)
    }

    /// Makes the load balancer of `namespace/name` answer Pending (or stop doing so).
    pub fn hold_pending(&self, namespace: &str, name: &str, pending: bool) {
        let key = format!("{namespace}/{name}");
        let mut set = self.load_balancers.pending.lock().expect("pending");
        if pending {
            set.insert(key);
        } else {
            set.remove(&key);
        }
    }

    /// New load balancers get no address until [`FakeCloud::publish_ingress`].
    pub fn delay_addresses(&self, delayed: bool) {
        *self.load_balancers.delay_addresses.lock().expect("delay") = delayed;
    }

    /// Gives the load balancer of `namespace/name` the address `ip` and asks for a re-sync.
    pub fn publish_ingress(&self, namespace: &str, name: &str, ip: &str) {
        self.load_balancers.publish_ingress(namespace, name, ip);
    }

    /// The load balancer of `namespace/name`.
    pub fn load_balancer_of(&self, namespace: &str, name: &str) -> Option<FakeLb> {
        self.load_balancers
            .lbs
            .lock()
            .expect("lbs")
            .get(&format!("{namespace}/{name}"))
            .cloned()
    }

    /// How many load balancers exist.
    pub fn load_balancer_count(&self) -> usize {
        self.load_balancers.lbs.lock().expect("lbs").len()
    }

    /// The routes of table `id`.
    pub fn routes_of(&self, id: &str) -> Vec<Route> {
        self.routes
            .tables
            .lock()
            .expect("tables")
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    fn why_not(&self, capability: &str) -> Option<Unsupported> {
        self.unsupported
            .lock()
            .expect("unsupported")
            .get(capability)
            .map(|r| Unsupported(r.clone()))
    }
}

impl Cloud for FakeCloud {
    fn instances(&self) -> Capability<dyn InstancesV2> {
        match self.why_not("instances") {
            Some(why) => Err(why),
            None => Ok(self.instances.clone()),
        }
    }

    fn load_balancer(&self) -> Capability<dyn LoadBalancer> {
        match self.why_not("load_balancer") {
            Some(why) => Err(why),
            None => Ok(self.load_balancers.clone()),
        }
    }

    fn routes(&self) -> Capability<dyn Routes> {
        match self.why_not("routes") {
            Some(why) => Err(why),
            None => Ok(self.routes.clone()),
        }
    }

    fn readiness_gates(&self) -> Vec<ReadinessGate> {
        Vec::new()
    }

    fn describe(&self) -> String {
        "the fake cloud".into()
    }
}

/// A running instance serving node `node_name`, with one internal IP.
pub fn running(id: &str, node_name: &str, ip: &str) -> FakeInstance {
    FakeInstance {
        id: id.into(),
        node_name: node_name.into(),
        zone: "fake-zone-a".into(),
        instance_type: "fake.large".into(),
        addresses: vec![stratus_cloud::NodeAddress::new(
            stratus_cloud::NodeAddressType::InternalIP,
            ip,
        )],
        state: InstanceState::Running,
    }
}
