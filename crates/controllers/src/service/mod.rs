//! The service controller: cloud load balancers for `type: LoadBalancer` Services.
//!
//! This build has the pure decisions only; the driver and the AWS load balancers come next.

pub mod plan;
