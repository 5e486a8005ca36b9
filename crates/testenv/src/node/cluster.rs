//! [`RealCluster`]: a one-node Kubernetes cluster with a real kubelet on containerd, inside the
//! test's private network namespace ([`crate::node::netns`]): etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kubelet and kube-proxy of one release, images
//! imported with `ctr`. One runs at a time on a machine (a lock in the cache): kubelet's cgroups
//! and the host-wide sysctls it sets are shared. Teardown ([`RealCluster::teardown`], or drop)
//! leaves nothing on the host.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};

use crate::core::cluster::{kube_client, wait_apiserver_ready};
use crate::core::process::Proc;
use crate::core::util::{log_tail, random_token};
use crate::node::containerd::Containerd;
use crate::node::host_state::HostState;
use crate::node::images::{self, ImageArchive};
use crate::node::netns::{self, NODE_INTERFACE};
use crate::node::pki::Pki;
use crate::node::{agents, control_plane, teardown};
use crate::tools::install::{ensure_installed, Paths};

/// The node's name (kubelet's `--hostname-override`).
pub const NODE_NAME: &str = "stratus-node";

/// The label of control-plane nodes.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// How long the node may take to become Ready once kubelet runs.
const NODE_READY_DEADLINE: Duration = Duration::from_secs(60);

/// A running real cluster.
pub struct RealCluster {
    pub(crate) dir: PathBuf,
    pki: Pki,
    pub(crate) containerd: Option<Containerd>,
    /// Started processes, in start order (stopped in reverse).
    pub(crate) procs: Vec<Proc>,
    /// Host-wide sysctls as they were before kubelet started, restored at teardown.
    pub(crate) sysctls: Vec<(String, String)>,
    pub(crate) torn_down: bool,
    /// The host as it was before anything started (teardown compares).
    pub(crate) host_before: HostState,
    _lock: File,
    started_in: Duration,
}

impl RealCluster {
    /// Starts the cluster with `images` imported (the pause image is added), and returns once
    /// the Node is registered and Ready (it keeps the external cloud provider's
    /// `uninitialized` taint until a CCM initialises it) and the `default` ServiceAccount
    /// exists. The calling thread must be in a private network namespace
    /// ([`netns::run`]).
    pub async fn start(images: &[ImageArchive]) -> Result<RealCluster> {
        if !netns::interfaces()?.iter().any(|i| i == NODE_INTERFACE) {
            bail!("the real cluster runs only inside a private network namespace: wrap the test in stratus_testenv::node::netns::run");
        }
        let paths = tokio::task::spawn_blocking(|| -> Result<Paths> {
            let paths = ensure_installed()?;
            crate::tools::node_runtime::require()?;
            crate::tools::pause::ensure_installed()?;
            Ok(paths)
        })
        .await
        .context("install task panicked")??;
        let lock = tokio::task::spawn_blocking({
            let paths = paths.clone();
            move || crate::tools::lock(&paths, "real-cluster")
        })
        .await
        .context("lock task panicked")??;
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "stratus-real-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        let host_before = HostState::capture(&dir);
        std::fs::create_dir_all(&dir)?;
        let server = control_plane::apiserver_url();
        let pki = Pki::create(&dir, netns::NODE_IP, NODE_NAME, &server)?;
        let mut cluster = RealCluster {
            sysctls: teardown::read_sysctls(),
            dir,
            pki,
            containerd: None,
            procs: Vec::new(),
            torn_down: false,
            host_before,
            _lock: lock,
            started_in: Duration::ZERO,
        };
        cluster.boot(&paths, images).await?;
        cluster.started_in = started.elapsed();
        Ok(cluster)
    }

    async fn boot(&mut self, paths: &Paths, images: &[ImageArchive]) -> Result<()> {
        let dir = self.dir.clone();
        let containerd = Containerd::start(&dir).await?;
        let pause = images::pause(&crate::tools::pause::binary(paths))?;
        for image in std::iter::once(&pause).chain(images) {
            containerd
                .import(&image.archive, &image.repository)
                .with_context(|| format!("importing {}", image.reference()))?;
        }
        let endpoint = containerd.endpoint();
        self.containerd = Some(containerd);
        let (etcd, mut apiserver) =
            control_plane::start_store_and_apiserver(paths, &dir, &self.pki)?;
        self.procs.push(etcd);
        let admin = self.pki.kubeconfig("admin");
        wait_apiserver_ready(&mut apiserver, &admin, Duration::from_secs(60)).await?;
        self.procs.push(apiserver);
        let (kcm, scheduler) = control_plane::start_controllers(paths, &dir, &self.pki)?;
        self.procs.extend([kcm, scheduler]);
        let kubelet = agents::start_kubelet(paths, &dir, &self.pki, NODE_NAME, &endpoint)?;
        self.procs.push(kubelet);
        let proxy = agents::start_proxy(paths, &dir, &self.pki, NODE_NAME)?;
        self.procs.push(proxy);
        self.wait_node_ready().await?;
        self.label_control_plane().await?;
        self.wait_default_service_account().await
    }

    async fn wait_node_ready(&mut self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client().await?);
        let deadline = Instant::now() + NODE_READY_DEADLINE;
        loop {
            if let Some(node) = nodes.get_opt(NODE_NAME).await? {
                let ready = node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if ready {
                    return Ok(());
                }
            }
            for proc in &mut self.procs {
                proc.check_running()?;
            }
            if Instant::now() >= deadline {
                bail!(
                    "node {NODE_NAME} not Ready after {NODE_READY_DEADLINE:?}; kubelet log:\n{}",
                    self.log("kubelet", 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The node runs the control plane: labelled so, as kubeadm does (kubelet may not set a
    /// `node-role` label itself), so charts selecting control-plane nodes schedule here.
    async fn label_control_plane(&self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client().await?);
        let patch = serde_json::json!({"metadata": {"labels": {CONTROL_PLANE_LABEL: ""}}});
        nodes
            .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("labelling the node as control plane")?;
        Ok(())
    }

    async fn wait_default_service_account(&self) -> Result<()> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client().await?, "default");
        let deadline = Instant::now() + Duration::from_secs(30);
        while accounts.get_opt("default").await?.is_none() {
            if Instant::now() >= deadline {
                bail!(
                    "no default ServiceAccount after 30 s; kube-controller-manager log:\n{}",
                    self.log("kube-controller-manager", 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// An admin (`system:masters`) client.
    pub async fn client(&self) -> Result<kube::Client> {
        kube_client(&self.kubeconfig()).await
    }

    /// The admin kubeconfig (client certificate), for helm and kubectl-like tools.
    pub fn kubeconfig(&self) -> PathBuf {
        self.pki.kubeconfig("admin")
    }

    /// The cluster's directory (logs, PKI, state).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// kubelet's root directory (the CSI charts' kubelet path).
    pub fn kubelet_root(&self) -> PathBuf {
        agents::kubelet_root(&self.dir)
    }

    /// The apiserver's audit log (writes, as JSON lines).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// How long start took, from holding the lock to the default ServiceAccount.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The last `lines` of a component's log (`kubelet`, `containerd`, `kube-apiserver`…).
    pub fn log(&self, component: &str, lines: usize) -> String {
        log_tail(&self.dir.join(format!("{component}.log")), lines)
    }

    /// The images containerd holds.
    pub fn images(&self) -> Result<Vec<String>> {
        self.containerd
            .as_ref()
            .context("containerd is stopped")?
            .images()
    }
}
