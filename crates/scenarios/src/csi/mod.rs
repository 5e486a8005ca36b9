//! The CSI harness the three drivers' tests (EBS, Cinder, DVP) and the CSI benchmark share; each
//! driver's tests keep only their cloud's part (the driver's flags, the node's instance, what is
//! left in the cloud).
//!
//! - [`driver`]: a driver binary started in a test directory (its socket, log and loop devices),
//!   and a gRPC channel to it.
//! - [`sanity`]: csi-sanity against a started driver, with this machine's skips, judged the same
//!   way for every driver.
//! - [`harness`]: the controller side as the driver's chart deploys it, outside a pod — the
//!   chart's RBAC and ServiceAccount, kube-controller-manager's persistent-volume controllers,
//!   the upstream sidecars with the chart's arguments — and the controller "pod" that can be
//!   SIGKILLed and started again; run within a deadline with the logs in a failure.
//! - [`flow`]: its building blocks (the chart rendered by helm, sidecar arguments, the Node and
//!   CSINode a kubelet would write, log tails).
//! - [`claims`]: StorageClass, PVCs and VolumeAttachments, with waits.
//! - [`bench`], [`node_probe`]: the benchmark's load and the node plugin's footprint.
//! - [`contract`]: a driver started as a Deckhouse module starts it, checked as the kubelet
//!   and the sidecars would check it.

pub mod bench;
pub mod claims;
pub mod contract;
pub mod driver;
pub mod flow;
pub mod harness;
pub mod node_probe;
pub mod sanity;
