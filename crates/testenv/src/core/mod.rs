//! What every cloud of the test environment shares: a Kubernetes cluster ([`KubeCluster`]:
//! etcd, kube-apiserver, identities, audit log), child processes, the protocol-neutral counting
//! and fault proxy ([`proxy`]), the HTTPS client for secure ports, the least-privilege RBAC
//! checks, the real Cluster API manager, and small helpers.

pub mod audit;
pub mod capi;
pub mod cluster;
pub mod https;
pub mod intercept;
pub(crate) mod process;
pub mod proxy;
pub mod rbac_check;
pub mod rbac_required;
pub(crate) mod repo;
pub(crate) mod util;

pub use cluster::{Identity, KubeCluster};
