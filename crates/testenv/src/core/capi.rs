//! The real Cluster API core manager against a test cluster: its CRDs applied (and established),
//! then the manager process (built by [`crate::tools::cluster_api`]) with the cluster's admin
//! kubeconfig. Every listener is on 127.0.0.1: health and diagnostics by flag, the webhook server
//! by the one-line change the build makes (see [`crate::tools::cluster_api`]), checked at start
//! from the kernel's socket table. The webhook server gets a free port and a throwaway
//! self-signed certificate — no webhook configuration points at it, so nothing calls it. The
//! `RuntimeSDK` feature gate is on: ExtensionConfigs are discovered (capdvp's runtime extension).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use crate::core::process::{Lifetime, Proc};
use crate::tools::cluster_api::{self, ClusterApi};
use crate::{Identity, KubeCluster};

/// A running Cluster API manager; dropping it stops the process.
pub struct ClusterApiManager {
    proc: Proc,
    log: PathBuf,
    health: u16,
}

/// 127.0.0.1 as `/proc/net/tcp` writes it.
const LOOPBACK_V4: &str = "0100007F";

/// Local addresses (hex, as the kernel writes them) of the TCP sockets listening on `port`, v4
/// and v6, in the calling thread's network namespace (`/proc/net` shows the main thread's, which
/// a test in its own namespace — `node::netns::run` — has left behind).
fn listeners_on(port: u16) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for table in ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        out.extend(listening_addresses(&text, port));
    }
    Ok(out)
}

/// The listening (state `0A`) local addresses on `port` in a `/proc/net/tcp*` table.
fn listening_addresses(table: &str, port: u16) -> Vec<String> {
    let port = format!("{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            let (address, p) = local.split_once(':')?;
            (state == "0A" && p == port).then(|| address.to_string())
        })
        .collect()
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
        crate::core::cluster::wait_established(client, name).await?;
    }
    Ok(names)
}

impl ClusterApiManager {
    /// Builds the manager if needed (long, once), installs Cluster API's CRDs into `cluster` and
    /// starts the manager; returns once its health endpoint answers.
    pub async fn start(cluster: &KubeCluster) -> Result<ClusterApiManager> {
        let admin = cluster.kube_client(Identity::Admin).await?;
        let kubeconfig = cluster.kubeconfig(Identity::Admin);
        ClusterApiManager::start_with(&admin, &kubeconfig, cluster.dir()).await
    }

    /// The same against any cluster (e.g. the real node's): `admin` and `kubeconfig` are its
    /// administrator's, `dir` holds the manager's certificates and log.
    pub async fn start_with(
        admin: &kube::Client,
        kubeconfig: &std::path::Path,
        dir: &std::path::Path,
    ) -> Result<ClusterApiManager> {
        let installed: ClusterApi = tokio::task::spawn_blocking(cluster_api::ensure_installed)
            .await
            .context("Cluster API build task panicked")??;
        install_crds(admin, &installed.crds).await?;
        let certs = dir.join("capi-webhook-certs");
        std::fs::create_dir_all(&certs)?;
        let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .context("generating the webhook certificate")?;
        std::fs::write(certs.join("tls.crt"), key.cert.pem())?;
        std::fs::write(certs.join("tls.key"), key.signing_key.serialize_pem())?;
        let health = free_port()?;
        let webhook = free_port()?;
        let args: Vec<OsString> = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            format!("--health-addr=127.0.0.1:{health}"),
            format!("--diagnostics-address=127.0.0.1:{}", free_port()?),
            "--insecure-diagnostics=true".into(),
            format!("--webhook-port={webhook}"),
            format!("--webhook-cert-dir={}", certs.display()),
            "--machine-concurrency=20".into(),
            // ExtensionConfigs are discovered and runtime hooks called (capdvp's extension).
            "--feature-gates=RuntimeSDK=true".into(),
            "--v=2".into(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        let log = dir.join("cluster-api-manager.log");
        let proc = Proc::spawn(
            "cluster-api-manager",
            &installed.manager,
            args,
            log.clone(),
            Lifetime::Attached,
        )?;
        let manager = ClusterApiManager { proc, log, health };
        manager.wait_healthy(Duration::from_secs(60)).await?;
        let listening = listeners_on(webhook)?;
        anyhow::ensure!(
            !listening.is_empty() && listening.iter().all(|a| a == LOOPBACK_V4),
            "the Cluster API webhook server must listen on 127.0.0.1 only; port {webhook} is \
             bound to {listening:?} (kernel hex addresses)"
        );
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
        crate::core::util::log_tail(&self.log, lines)
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_read_from_the_kernel_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:24FB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 00000000:24FB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:24FB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1
";
        assert_eq!(
            listening_addresses(table, 9467),
            vec!["0100007F".to_string(), "00000000".to_string()]
        );
        assert_eq!(listening_addresses(table, 8080), vec![LOOPBACK_V4]);
        assert!(listening_addresses(table, 1).is_empty());
    }
}
