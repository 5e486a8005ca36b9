//! The DVP platform simulator: kube-rs controllers on a parent cluster (a real kube-apiserver
//! carrying the `virtualization.deckhouse.io` CRDs) that play the virtualization platform's
//! controllers for one tenant namespace — VM phases, disk readiness, hot-plug attachments and
//! the parent LoadBalancer ingress — with [`Knobs`] for delays and faults. The test environment
//! (`stratus-testenv`'s `DvpEnv`) starts it beside the two clusters.
//!
//! It watches VirtualMachines, VirtualDisks, VirtualMachineBlockDeviceAttachments, Services and
//! ServiceWithHealthchecks in that namespace and writes their status (and the Services a
//! ServiceWithHealthchecks owns).

pub mod plan;
mod sim;

pub use sim::{Knobs, PlatformSim, PLATFORM_NODE, VMBDA_FINALIZER};
