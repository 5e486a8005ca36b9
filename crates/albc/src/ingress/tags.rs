//! The tags and labels the Ingress driver puts on what it makes, so it finds its resources again
//! and the reaper knows them.

/// Cluster tag on every resource.
pub const CLUSTER_TAG: &str = "elbv2.k8s.aws/cluster";
/// Group tag on every resource.
pub const STACK_TAG: &str = "ingress.k8s.aws/stack";
/// Resource kind tag.
pub const RESOURCE_TAG: &str = "ingress.k8s.aws/resource";
/// Label on the internal TargetGroupBindings.
pub const STACK_LABEL: &str = "ingress.k8s.aws/stack-hash";
