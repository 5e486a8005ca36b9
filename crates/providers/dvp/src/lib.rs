//! Stratus DVP provider: the tenant cluster's nodes are `VirtualMachine`s in one namespace of a
//! parent DVP (Deckhouse Virtualization Platform) cluster; drop-in compatible with Deckhouse's
//! DVP cloud-controller-manager (`DVP_KUBERNETES_CONFIG_BASE64`/`DVP_NAMESPACE`, providerID
//! `dvp://<vm>`, the `dvp.deckhouse.io/hostname` label).
//!
//! Watches the parent namespace's VirtualMachines once (a shared reflector cache) and answers
//! every instance question from it; asks the parent directly only to confirm that a VM is gone.
//! Writes nothing to either cluster (load balancers are not implemented yet).

pub mod cloud;
pub mod config;
pub mod instances;
pub mod metrics;
pub mod provider_id;
pub mod view;

pub use cloud::{DvpCloud, DvpProvider};
