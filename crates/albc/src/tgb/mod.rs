//! TargetGroupBinding: a Service's endpoints (pod IPs or node ports) kept registered in an
//! existing ELBv2 target group.

pub mod driver;
pub mod internal;
pub mod networking;
pub mod plan;
pub mod readiness;
pub mod sg_rules;
pub mod targets;
