//! Stratus DVP provider: the tenant cluster's nodes are `VirtualMachine`s in one namespace of a
//! parent DVP (Deckhouse Virtualization Platform) cluster; drop-in compatible with Deckhouse's
//! DVP cloud-controller-manager (`DVP_KUBERNETES_CONFIG_BASE64`/`DVP_NAMESPACE`, providerID
//! `dvp://<vm>`, the `dvp.deckhouse.io/hostname` label).
//!
//! Watches the parent namespace's VirtualMachines once (a shared reflector cache) and answers
//! every instance question from it; asks the parent directly only to confirm that a VM is gone.
//! Load balancers: a parent LoadBalancer Service per tenant Service, selecting the target
//! nodes' VMs by a per-LB label; a watch of those parent Services re-syncs the tenant Service the
//! moment its address appears. Writes to the parent: Services and VM labels only.

pub mod cloud;
pub mod config;
pub mod instances;
pub mod lb;
pub mod metrics;
pub mod provider_id;
pub mod view;

pub use cloud::{DvpCloud, DvpProvider};
