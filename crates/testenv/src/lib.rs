//! Stratus test environment: real Kubernetes clusters and the clouds beside them, for
//! integration tests and for humans (`testenv up`), organised by cloud:
//!
//! - [`core`]: what every cloud shares — a [`KubeCluster`] (etcd + kube-apiserver, RBAC, audit
//!   log; it can start more than once in a process), child processes, the protocol-neutral
//!   counting and fault proxy, the least-privilege RBAC checks, the real Cluster API manager.
//! - [`aws`]: moto behind the proxy speaking AWS ([`AwsEnv`], for components that never talk
//!   to Kubernetes; [`TestEnv`] is one cluster plus AWS), the gaps of moto the proxy fills, the
//!   ASG lifecycle actions.
//! - [`openstack`]: a real Keystone and the simulators of `stratus-openstack-sim` behind the
//!   proxy speaking OpenStack ([`OpenStackEnv`]).
//! - [`dvp`]: a tenant and a parent cluster with the generated virtualization CRDs, the tenant's
//!   namespace-bound identity and the platform simulator of `stratus-dvp-sim` ([`DvpEnv`]).
//! - [`tools`]: the installers, one module per tool, each from an exact pin into the cache.
//! - [`cli`]: the `testenv` command line.
//! - [`runner`]: `testenv test`, the workspace's tests several at once, each in its own process.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use stratus_testenv::{Identity, TestEnv};
//! let env = TestEnv::start().await?;
//! let client = env.kube_client(Identity::CloudControllerManager).await?;
//! let aws_vars = env.env_vars(Identity::CloudControllerManager);
//! # let _ = (client, aws_vars);
//! # Ok(()) }
//! ```

pub mod aws;
pub mod cli;
pub mod core;
pub mod dvp;
pub mod node;
pub mod openstack;
pub mod runner;
pub mod tools;

pub use crate::aws::{AwsEnv, TestEnv};
pub use crate::core::cluster::{Identity, KubeCluster};
pub use crate::core::proxy::{Fault, FaultKind, Hold};
pub use crate::core::repo::repo_root;
pub use crate::dvp::DvpEnv;
pub use crate::openstack::{OpenStackCredentials, OpenStackEnv, OpenStackOptions};
pub use crate::tools::install::{ensure_installed, Paths};
