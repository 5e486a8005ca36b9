//! Service → NLB: LoadBalancer Services of class `service.k8s.aws/nlb` (or the `external` type
//! annotation) get a network load balancer whose target groups are fed by internal
//! TargetGroupBindings; annotations and plan are pure, the driver applies them.

pub mod annotations;
pub mod driver;
pub mod listeners;
pub mod plan;
