//! The AWS cloud of the environment: moto behind the counting and fault proxy (the AWS protocol
//! of [`crate::core::proxy`], [`super::proxy`]), each on a free 127.0.0.1 port. Alone it serves components that never
//! talk to Kubernetes (the ECR credential provider) and starts in about a second; [`TestEnv`]
//! pairs it with a [`crate::KubeCluster`].
//!
//! [`TestEnv`]: crate::TestEnv

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::aws::ProxyControl;
use crate::core::cluster::start_timeout;
use crate::core::process::{Launch, Proc};
use crate::core::proxy::{self, ProxyThread};
use crate::core::util::{
    free_listeners, is_port_conflict, random_token, remove_env_dir, HttpClient,
};
use crate::tools::install::ensure_installed;

/// Where the AWS proxy runs.
enum ProxyRunner {
    InProcess(ProxyThread),
    Process(Proc),
}

/// moto behind the counting proxy. Dropping it stops both and, when it made its own directory,
/// deletes it (unless `STRATUS_KEEP_ENV=1`).
pub struct AwsEnv {
    dir: PathBuf,
    remove_dir: bool,
    released: bool,
    aws_endpoint: String,
    moto_endpoint: String,
    moto: Proc,
    proxy: ProxyRunner,
}

impl AwsEnv {
    /// Installs the tools if needed and starts moto and the proxy in a fresh temporary
    /// directory; returns once both answer.
    pub async fn start() -> Result<AwsEnv> {
        let dir = std::env::temp_dir().join(format!(
            "stratus-aws-env-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        let result = AwsEnv::launch(&dir, &Launch::Owned).await;
        match result {
            Ok(mut env) => {
                env.remove_dir = true;
                Ok(env)
            }
            Err(err) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(err)
            }
        }
    }

    /// Starts moto and the proxy with their logs in `dir` (created if needed), retrying on a
    /// port conflict.
    pub(crate) async fn launch(dir: &Path, launch: &Launch) -> Result<AwsEnv> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut attempt = 1;
        loop {
            match AwsEnv::launch_once(dir, launch).await {
                Err(err) if attempt < 3 && is_port_conflict(&err) => {
                    eprintln!("stratus-testenv: port conflict, retrying: {err:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn launch_once(dir: &Path, launch: &Launch) -> Result<AwsEnv> {
        let paths = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        let mut listeners = free_listeners(2)?;
        let proxy_listener = listeners.pop().expect("two listeners");
        let moto_port = listeners[0].local_addr()?.port();
        let proxy_port = proxy_listener.local_addr()?.port();
        drop(listeners);
        let moto_endpoint = format!("http://127.0.0.1:{moto_port}");
        let lifetime = launch.lifetime();
        let mut moto = Proc::spawn(
            "moto",
            &paths.moto_server,
            ["-H", "127.0.0.1", "-p", &moto_port.to_string()]
                .map(OsString::from)
                .to_vec(),
            dir.join("moto.log"),
            lifetime,
        )?;
        let proxy = match launch {
            Launch::Owned => ProxyRunner::InProcess(ProxyThread::start(
                proxy_listener,
                moto_endpoint.clone(),
                super::proxy::aws(),
            )?),
            Launch::Detached { proxy_exe } => {
                drop(proxy_listener);
                let listen = format!("127.0.0.1:{proxy_port}");
                ProxyRunner::Process(Proc::spawn(
                    "aws-proxy",
                    proxy_exe,
                    ["proxy", "--listen", &listen, "--upstream", &moto_endpoint]
                        .map(OsString::from)
                        .to_vec(),
                    dir.join("aws-proxy.log"),
                    lifetime,
                )?)
            }
        };
        let aws_endpoint = format!("http://127.0.0.1:{proxy_port}");
        let timeout = start_timeout();
        let http = HttpClient::new();
        let moto_probe = format!("{moto_endpoint}/moto-api/");
        // Only moto's own dashboard counts: the port was free when picked, but another server
        // started beside this one may have taken it before moto bound it (moto then exits with
        // "address in use" and the launch is retried).
        moto.wait_ready(timeout, || async {
            let (status, body) = http.get(&moto_probe).await?;
            anyhow::ensure!(
                status.is_success() && body.windows(4).any(|w| w == b"Moto"),
                "{moto_probe} is served by something other than moto ({status})"
            );
            Ok(())
        })
        .await?;
        let mut env = AwsEnv {
            dir: dir.to_path_buf(),
            remove_dir: false,
            released: false,
            aws_endpoint,
            moto_endpoint,
            moto,
            proxy,
        };
        if let ProxyRunner::Process(proc) = &mut env.proxy {
            let probe = format!("{}{}", env.aws_endpoint, proxy::COUNTS_PATH);
            proc.wait_ready(timeout, || async {
                let (status, _) = http.get(&probe).await?;
                anyhow::ensure!(status.is_success(), "proxy answered {status}");
                Ok(())
            })
            .await?;
        }
        Ok(env)
    }

    /// The environment's directory (moto's log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `http://127.0.0.1:PORT` of the counting proxy in front of moto; point AWS SDKs here.
    pub fn aws_endpoint(&self) -> &str {
        &self.aws_endpoint
    }

    /// moto itself, bypassing the counters.
    pub fn moto_endpoint(&self) -> &str {
        &self.moto_endpoint
    }

    /// Environment variables for a process using this environment as its AWS: the endpoint,
    /// moto's test credentials, `us-east-1`, and IMDS off.
    pub fn env_vars(&self) -> Vec<(String, String)> {
        self.proxy_control().aws_env_vars()
    }

    /// The AWS proxy's control endpoints.
    pub fn proxy_control(&self) -> ProxyControl<'_> {
        ProxyControl {
            endpoint: &self.aws_endpoint,
        }
    }

    /// AWS requests seen by the proxy so far, keyed by `service:Action` (unsigned requests,
    /// such as STS `AssumeRoleWithWebIdentity`, count as `unknown:Action`).
    pub async fn aws_request_counts(&self) -> Result<BTreeMap<String, u64>> {
        self.proxy_control().counts().await
    }

    /// All AWS requests seen by the proxy so far.
    pub async fn aws_request_total(&self) -> Result<u64> {
        Ok(self.aws_request_counts().await?.values().sum())
    }

    /// Zeroes the proxy's request counters.
    pub async fn reset_aws_request_counts(&self) -> Result<()> {
        self.proxy_control().reset().await
    }

    /// Sets the lifetime of the ECR and ECR Public tokens answered from now on; `None` keeps
    /// moto's already expired ones (see [`proxy`]).
    pub async fn set_ecr_token_lifetime(&self, lifetime: Option<Duration>) -> Result<()> {
        self.proxy_control().set_ecr_token_lifetime(lifetime).await
    }

    /// `(name, pid)` of the child processes (the in-process proxy has none).
    pub(crate) fn pids(&self) -> Vec<(&'static str, u32)> {
        let mut procs = vec![&self.moto];
        if let ProxyRunner::Process(proxy) = &self.proxy {
            procs.push(proxy);
        }
        procs
            .into_iter()
            .filter_map(|p| Some((p.name(), p.pid()?)))
            .collect()
    }

    /// Leaves the processes in place when `self` is dropped (`testenv up`).
    pub(crate) fn release(mut self) {
        self.released = true;
        self.moto.release();
        if let ProxyRunner::Process(proxy) = &mut self.proxy {
            proxy.release();
        }
    }
}

impl Drop for AwsEnv {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match &mut self.proxy {
            ProxyRunner::InProcess(proxy) => proxy.stop(),
            ProxyRunner::Process(proxy) => {
                crate::core::process::stop_all(&mut [proxy], Duration::from_secs(5))
            }
        }
        crate::core::process::stop_all(&mut [&mut self.moto], Duration::from_secs(5));
        remove_env_dir(&self.dir, self.remove_dir);
    }
}
