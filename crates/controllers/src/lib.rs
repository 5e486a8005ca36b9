//! Generic cloud controllers of Stratus: node initialisation, node lifecycle, service load
//! balancers, cloud routes, node pod-CIDR allocation and tags on the nodes' cloud resources.
//!
//! Watches Nodes and Services; writes Node spec/labels/taints/pod CIDRs, `nodes/status`
//! addresses and conditions, Node deletions, the tagging controller's Node label and
//! annotation, Service finalizers and `services/status` ingress, and Events (events.k8s.io).
//! Each controller is a pure `plan` module plus a thin kube-rs driver; cloud questions go
//! through the [`stratus_cloud`] traits.

pub mod informer;
pub mod metrics;
pub mod node;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod node_view;
pub mod resync;
pub mod route;
pub mod service;
pub mod tagging;

/// Taint the kubelet sets on nodes waiting for the cloud-node controller.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Taint marking a node whose instance is shut down.
pub const TAINT_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Annotation in which the kubelet records `--node-ip` when a cloud provider is external.
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
