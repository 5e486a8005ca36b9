//! The whole test environment: a [`KubeCluster`] and the AWS cloud ([`AwsEnv`]: moto behind the
//! counting proxy), side by side in one directory.
//!
//! [`TestEnv::start`] owns its processes (killed on drop). The `testenv up` command starts the
//! very same stack detached (`Launch::Detached`) and leaves it running.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::aws::env::AwsEnv;
use crate::aws::ProxyControl;
use crate::core::cluster::{Identity, KubeCluster};
use crate::core::process::Launch;
use crate::core::proxy;
use crate::core::util::{random_token, remove_env_dir};

/// A running environment. Dropping it stops the processes and deletes its directory (unless
/// `STRATUS_KEEP_ENV=1`, or it was started by `testenv up` and released).
pub struct TestEnv {
    dir: PathBuf,
    remove_dir: bool,
    released: bool,
    // Dropped in this order: the cluster first, then the cloud.
    cluster: Option<KubeCluster>,
    aws: Option<AwsEnv>,
}

impl TestEnv {
    /// Installs the tools if needed (see [`crate::ensure_installed`]) and starts etcd,
    /// kube-apiserver, moto and the counting proxy in a fresh temporary directory. Returns once
    /// the apiserver is ready and the `default` and `kube-system` namespaces exist.
    pub async fn start() -> Result<TestEnv> {
        let dir = std::env::temp_dir().join(format!(
            "stratus-env-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        let mut env = TestEnv::launch(&dir, Launch::Owned).await?;
        env.remove_dir = true;
        Ok(env)
    }

    /// Starts the stack with its files in `dir` (created if needed). Shared by [`TestEnv::start`]
    /// and `testenv up`.
    pub(crate) async fn launch(dir: &Path, launch: Launch) -> Result<TestEnv> {
        let (cluster, aws) = tokio::try_join!(
            KubeCluster::launch(dir, launch.lifetime()),
            AwsEnv::launch(dir, &launch)
        )?;
        Ok(TestEnv {
            dir: cluster.dir().to_path_buf(),
            remove_dir: false,
            released: false,
            cluster: Some(cluster),
            aws: Some(aws),
        })
    }

    /// The Kubernetes cluster.
    pub fn cluster(&self) -> &KubeCluster {
        self.cluster.as_ref().expect("cluster present until drop")
    }

    fn cluster_mut(&mut self) -> &mut KubeCluster {
        self.cluster.as_mut().expect("cluster present until drop")
    }

    /// The AWS cloud.
    pub fn aws(&self) -> &AwsEnv {
        self.aws.as_ref().expect("aws present until drop")
    }

    /// The environment's directory (logs, kubeconfigs, audit log, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `https://127.0.0.1:PORT` (self-signed certificate).
    pub fn apiserver_url(&self) -> &str {
        self.cluster().apiserver_url()
    }

    /// The kubeconfig file for `identity` (token auth, `insecure-skip-tls-verify: true`).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.cluster().kubeconfig(identity)
    }

    /// The bearer token of `identity`.
    pub fn token(&self, identity: Identity) -> &str {
        self.cluster().token(identity)
    }

    /// A kube client authenticated as `identity`.
    pub async fn kube_client(&self, identity: Identity) -> Result<kube::Client> {
        self.cluster().kube_client(identity).await
    }

    /// `http://127.0.0.1:PORT` of the counting proxy in front of moto; point AWS SDKs here.
    pub fn aws_endpoint(&self) -> &str {
        self.aws().aws_endpoint()
    }

    /// moto itself, bypassing the counters (for test setup that should not be counted).
    pub fn moto_endpoint(&self) -> &str {
        self.aws().moto_endpoint()
    }

    /// Environment variables for a process acting as `identity` against this environment.
    pub fn env_vars(&self, identity: Identity) -> Vec<(String, String)> {
        let mut vars = vec![(
            "KUBECONFIG".to_owned(),
            self.kubeconfig(identity).display().to_string(),
        )];
        vars.extend(self.aws().env_vars());
        vars
    }

    /// The AWS proxy's control endpoints.
    pub fn proxy_control(&self) -> ProxyControl<'_> {
        self.aws().proxy_control()
    }

    /// AWS requests seen by the proxy so far, keyed by `service:Action`.
    pub async fn aws_request_counts(&self) -> Result<BTreeMap<String, u64>> {
        self.proxy_control().counts().await
    }

    /// Holds matching AWS requests without an answer from now on (see [`proxy::Hold`]);
    /// an empty list stops holding.
    pub async fn hold_aws_requests(&self, holds: &[proxy::Hold]) -> Result<()> {
        self.proxy_control().hold(holds).await
    }

    /// Injects AWS faults from now on (see [`proxy::Fault`]); an empty list stops injecting.
    pub async fn set_aws_faults(&self, faults: &[proxy::Fault]) -> Result<()> {
        self.proxy_control().set_faults(faults).await
    }

    /// What the AWS proxy saw each second (requests, injected throttles and failures), keyed by
    /// Unix second.
    pub async fn aws_timeline(&self) -> Result<BTreeMap<u64, proxy::Second>> {
        self.proxy_control().timeline().await
    }

    /// Lets every AWS request held so far go on (see [`proxy::RELEASE_PATH`]); pair it with
    /// `hold_aws_requests(&[])` so that new requests are not held again.
    pub async fn release_held_aws_requests(&self) -> Result<()> {
        self.proxy_control().release().await
    }

    /// Zeroes the proxy's request counters.
    pub async fn reset_aws_request_counts(&self) -> Result<()> {
        self.proxy_control().reset().await
    }

    /// Completed write requests made by `username`, leaving out Lease renewals (see
    /// [`KubeCluster::kube_writes_by`]).
    pub fn kube_writes_by(&self, username: &str) -> Result<u64> {
        self.cluster().kube_writes_by(username)
    }

    /// Completed write requests made by `username` to `resource` (see
    /// [`KubeCluster::kube_writes_to`]).
    pub fn kube_writes_to(&self, username: &str, resource: &str) -> Result<u64> {
        self.cluster().kube_writes_to(username, resource)
    }

    /// Completed write requests made by `username` to one object (see
    /// [`KubeCluster::kube_writes_to_object`]).
    pub fn kube_writes_to_object(&self, username: &str, resource: &str, name: &str) -> Result<u64> {
        self.cluster()
            .kube_writes_to_object(username, resource, name)
    }

    /// Stops kube-apiserver and starts it again on the same port with the same etcd.
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.cluster_mut().restart_apiserver().await
    }

    /// Stops kube-apiserver (etcd keeps running) until [`TestEnv::start_apiserver`].
    pub fn stop_apiserver(&mut self) {
        self.cluster_mut().stop_apiserver()
    }

    /// Starts the stopped kube-apiserver again on the same port with the same etcd.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        self.cluster_mut().start_apiserver().await
    }

    /// `(name, pid)` of the child processes.
    pub(crate) fn pids(&self) -> Vec<(&'static str, u32)> {
        let mut pids = self.cluster().pids();
        pids.extend(self.aws().pids());
        pids
    }

    /// Leaves the processes and the directory in place when `self` is dropped (`testenv up`).
    pub(crate) fn release(mut self) {
        self.released = true;
        if let Some(cluster) = self.cluster.take() {
            cluster.release();
        }
        if let Some(aws) = self.aws.take() {
            aws.release();
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        drop(self.cluster.take());
        drop(self.aws.take());
        remove_env_dir(&self.dir, self.remove_dir);
    }
}
