//! capdvp-controller-manager as a library: the Cluster API infrastructure provider for DVP.
//! It serves `infrastructure.cluster.x-k8s.io/v1alpha1` DeckhouseCluster, DeckhouseMachine and
//! DeckhouseMachineTemplate as Deckhouse's does, and makes for every DeckhouseMachine a
//! VirtualMachine with its boot and additional VirtualDisks and cloud-init Secret in the parent
//! DVP cluster's tenant namespace, reporting the Cluster API v1beta2 contract
//! (`status.initialization.provisioned`, `spec.providerID`, addresses). Watches, not periodic
//! requeues: the parent's VMs, disks and attachments wake their machines.
//!
//! Layout: [`api`] (the kinds), [`names`] (Deckhouse's names and labels), [`plan`] (pure
//! decisions), [`parent`] (parent I/O), [`machine`] and [`cluster`] (the reconcilers),
//! [`controllers`] (watches and wiring), [`extension`] (the runtime extension: in-place update
//! hooks), [`app`] (the process).

pub mod api;
pub mod app;
pub mod cluster;
pub mod controllers;
pub mod extension;
pub mod machine;
pub mod manager_args;
pub mod metrics;
pub mod names;
pub mod parent;
pub mod plan;
pub mod zap;
