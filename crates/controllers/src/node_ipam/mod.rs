//! The node-ipam controller: gives nodes without pod CIDRs one block of each cluster CIDR
//! (`--allocate-node-cidrs`), as kube-controller-manager's range allocator does.

pub mod cidr_set;
pub mod driver;
pub mod plan;

pub use driver::{run, NodeIpamConfig};
