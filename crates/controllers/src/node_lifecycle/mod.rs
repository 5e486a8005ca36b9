//! The cloud-node-lifecycle controller: deletes nodes whose instance is gone, taints stopped ones.

pub mod driver;
pub mod plan;

pub use driver::{run, LifecycleConfig};
