//! Stratus test environment: a real etcd + kube-apiserver (RBAC, audit log) and the moto AWS
//! emulator behind a request-counting proxy, for integration tests and for humans
//! (`testenv up`). [`AwsEnv`] is the AWS part alone, for components that never talk to
//! Kubernetes.
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

pub mod aws_env;
pub mod cli;
pub mod env;
pub mod faults;
pub mod install;
pub mod lifecycle;
mod process;
pub mod proxy;
pub mod proxy_control;
mod repo;
pub mod tools;
mod util;

pub use aws_env::AwsEnv;
pub use env::{Identity, TestEnv};
pub use install::{ensure_installed, Paths};
pub use repo::repo_root;
