//! The real Cluster API core manager against a test cluster: its CRDs applied (and established),
//! then the manager process (built by [`crate::tools::cluster_api`]) with the cluster's admin
//! kubeconfig. Health and diagnostics listen on 127.0.0.1 only; the webhook server, which the
//! manager's flags cannot move off the wildcard address, gets a free port and a throwaway
//! self-signed certificate — no webhook configuration points at it, so nothing calls it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use crate::process::{Lifetime, Proc};
use crate::tools::cluster_api::{self, ClusterApi};
use crate::{Identity, KubeCluster};

/// A running Cluster API manager; dropping it stops the process.
pub struct ClusterApiManager {
    proc: Proc,
    log: PathBuf,
    health: u16,
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Applies every CRD file of `dir` to the cluster (server-side apply) and waits until each is
/// established.
pub async fn install_crds(client: &kube::Client, dir: &std::path::Path) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply("stratus-testenv").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
        names.push(name);
    }
    for name in &names {
        crate::dvp::wait_established(client, name).await?;
    }
    Ok(names)
}

impl ClusterApiManager {
    /// Builds the manager if needed (long, once), installs Cluster API's CRDs into `cluster` and
    /// starts the manager; returns once its health endpoint answers.
    pub async fn start(cluster: &KubeCluster) -> Result<ClusterApiManager> {
        let installed: ClusterApi = tokio::task::spawn_blocking(cluster_api::ensure_installed)
            .await
            .context("Cluster API build task panicked")??;
        let admin = cluster.kube_client(Identity::Admin).await?;
        install_crds(&admin, &installed.crds).await?;
        let certs = cluster.dir().join("capi-webhook-certs");
        std::fs::create_dir_all(&certs)?;
        let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .context("generating the webhook certificate")?;
        std::fs::write(certs.join("tls.crt"), key.cert.pem())?;
        std::fs::write(certs.join("tls.key"), key.signing_key.serialize_pem())?;
        let health = free_port()?;
        let args: Vec<OsString> = vec![
            format!(
                "--kubeconfig={}",
                cluster.kubeconfig(Identity::Admin).display()
            ),
            "--leader-elect=false".into(),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--diagnostics-address=127.0.0.1:{}", free_port()?),
            "--insecure-diagnostics=true".into(),
            format!("--webhook-port={}", free_port()?),
            format!("--webhook-cert-dir={}", certs.display()),
            "--machine-concurrency=20".into(),
            "--v=2".into(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        let log = cluster.dir().join("cluster-api-manager.log");
        let proc = Proc::spawn(
            "cluster-api-manager",
            &installed.manager,
            args,
            log.clone(),
            Lifetime::Attached,
        )?;
        let manager = ClusterApiManager { proc, log, health };
        manager.wait_healthy(Duration::from_secs(60)).await?;
        Ok(manager)
    }

    async fn wait_healthy(&self, within: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + within;
        let url = format!("127.0.0.1:{}", self.health);
        loop {
            if let Ok(mut stream) = tokio::net::TcpStream::connect(&url).await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = stream
                    .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                    .await;
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer).await;
                if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "the Cluster API manager is not ready within {} s; log tail:\n{}",
                    within.as_secs(),
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The last `lines` of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::util::log_tail(&self.log, lines)
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }
}
