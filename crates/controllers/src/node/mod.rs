//! The cloud-node controller: initialises tainted nodes and keeps their addresses current.

pub mod driver;
pub mod plan;

pub use driver::{run, NodeControllerConfig};
