//! The AWS part of the environment alone: moto behind the counting proxy, without etcd and
//! kube-apiserver, for components that never talk to Kubernetes (the ECR credential provider).
//! Starts in about a second and leaves the CPU to what is measured.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::env::{is_port_conflict, ProxyThread};
use crate::install::ensure_installed;
use crate::process::{Lifetime, Proc};
use crate::proxy_control::ProxyControl;
use crate::util::{free_listeners, random_token, HttpClient};

/// moto behind the counting proxy, each on a free 127.0.0.1 port. Dropping it stops both and
/// deletes its directory (unless `STRATUS_KEEP_ENV=1`).
pub struct AwsEnv {
    dir: PathBuf,
    aws_endpoint: String,
    moto_endpoint: String,
    moto: Proc,
    proxy: ProxyThread,
}

impl AwsEnv {
    /// Installs the tools if needed and starts moto and the proxy in a fresh temporary
    /// directory; returns once moto answers.
    pub async fn start() -> Result<AwsEnv> {
        let dir = std::env::temp_dir().join(format!(
            "stratus-aws-env-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut attempt = 1;
        loop {
            match AwsEnv::launch(&dir).await {
                Err(err) if attempt < 3 && is_port_conflict(&err) => {
                    eprintln!("stratus-testenv: port conflict, retrying: {err:#}");
                    attempt += 1;
                }
                Err(err) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(err);
                }
                Ok(env) => return Ok(env),
            }
        }
    }

    async fn launch(dir: &Path) -> Result<AwsEnv> {
        let paths = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        let mut listeners = free_listeners(2)?;
        let proxy_listener = listeners.pop().expect("two listeners");
        let moto_port = listeners[0].local_addr()?.port();
        let proxy_port = proxy_listener.local_addr()?.port();
        drop(listeners);
        let moto_endpoint = format!("http://127.0.0.1:{moto_port}");
        let mut moto = Proc::spawn(
            "moto",
            &paths.moto_server,
            ["-H", "127.0.0.1", "-p", &moto_port.to_string()]
                .map(OsString::from)
                .to_vec(),
            dir.join("moto.log"),
            Lifetime::Attached,
        )?;
        let http = HttpClient::new();
        let probe = format!("{moto_endpoint}/moto-api/");
        moto.wait_ready(start_timeout(), || async {
            http.get(&probe).await.map(drop)
        })
        .await?;
        let proxy = ProxyThread::start(proxy_listener, moto_endpoint.clone())?;
        Ok(AwsEnv {
            dir: dir.to_path_buf(),
            aws_endpoint: format!("http://127.0.0.1:{proxy_port}"),
            moto_endpoint,
            moto,
            proxy,
        })
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
}

impl Drop for AwsEnv {
    fn drop(&mut self) {
        self.proxy.stop();
        crate::process::stop_all(&mut [&mut self.moto], Duration::from_secs(5));
        if std::env::var_os("STRATUS_KEEP_ENV").is_some_and(|v| v == "1") {
            eprintln!("stratus-testenv: kept {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn start_timeout() -> Duration {
    std::env::var("STRATUS_START_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(120), Duration::from_secs)
}
