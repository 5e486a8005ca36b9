//! Stratus test environment: real Kubernetes clusters (etcd + kube-apiserver, RBAC, audit log;
//! [`KubeCluster`] can start more than once in a process) and the moto AWS emulator behind a
//! counting and fault-injecting proxy, for integration tests and for humans (`testenv up`).
//! [`AwsEnv`] is the AWS part alone, for components that never talk to Kubernetes; [`TestEnv`]
//! is one cluster plus AWS. [`OpenStackEnv`] is the OpenStack cloud: a real Keystone and the
//! simulators of `stratus-openstack-sim`, behind the same proxy speaking OpenStack.
//! [`DvpEnv`] is DVP: a tenant and a parent cluster with the generated virtualization CRDs, the
//! tenant's namespace-bound identity and the platform simulator (`dvp/`).
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

pub mod audit;
pub mod aws_env;
pub mod capi;
pub mod cli;
mod cli_openstack;
pub mod cluster;
pub mod dvp;
pub mod env;
pub mod faults;
pub mod https;
pub mod install;
pub mod lifecycle;
pub mod openstack_env;
mod process;
pub mod proxy;
pub mod proxy_control;
pub mod rbac_check;
pub mod rbac_required;
mod repo;
pub mod tools;
mod util;

pub use aws_env::AwsEnv;
pub use cluster::{Identity, KubeCluster};
pub use dvp::DvpEnv;
pub use env::TestEnv;
pub use install::{ensure_installed, Paths};
pub use openstack_env::{OpenStackCredentials, OpenStackEnv, OpenStackOptions};
pub use repo::repo_root;

/// Resident memory of a process and its children (uWSGI's master and workers), in bytes.
pub(crate) fn process_tree_rss(pid: u32) -> Option<u64> {
    let rss = |p: u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    let mut total = rss(pid)?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            total += rss(child).unwrap_or(0);
        }
    }
    Some(total)
}
