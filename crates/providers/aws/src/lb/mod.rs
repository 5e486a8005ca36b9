//! AWS load balancers for LoadBalancer Services.

pub mod annotations;
