//! aws-load-balancer-controller as a library: the `elbv2.k8s.aws/v1beta1` kinds and the
//! TargetGroupBinding controller.
//!
//! Watches TargetGroupBindings, Services, EndpointSlices (labelled `kubernetes.io/service-name`)
//! and Nodes; writes the bindings' finalizer and `status.observedGeneration`, Events, and the
//! leader Lease; calls ELBv2 (DescribeTargetGroups, DescribeTargetHealth, RegisterTargets,
//! DeregisterTargets) through the shared AWS call guard.

pub mod app;
pub mod crd;
pub mod ingress;
pub mod metrics;
pub mod options;
pub mod tgb;
