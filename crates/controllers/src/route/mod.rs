//! The route controller: one cloud route per node pod CIDR, in every route table of the cluster,
//! and the nodes' `NetworkUnavailable` condition.

pub mod driver;
pub mod plan;

pub use driver::{run, RouteControllerConfig};
