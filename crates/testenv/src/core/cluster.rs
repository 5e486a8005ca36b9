//! One Kubernetes cluster of the test environment: etcd and kube-apiserver (RBAC, token auth,
//! audit log) on free 127.0.0.1 ports, with a kubeconfig per [`Identity`]. A unit that can start
//! more than once in one process (the DVP provider needs a parent cluster beside the tenant).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::core::process::{stop_all, Lifetime, Proc};
use crate::core::util::{free_listeners, is_port_conflict, random_token, HttpClient};
use crate::tools::install::{ensure_installed, Paths};

/// Who talks to the apiserver. Each identity has a static token and a kubeconfig file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Identity {
    /// `stratus-admin` in `system:masters`: may do anything.
    Admin,
    /// Authenticates exactly like the ServiceAccount `kube-system/cloud-controller-manager`, so
    /// RBAC bindings to that ServiceAccount apply.
    CloudControllerManager,
    /// `stratus-nobody`, authenticated and bound to nothing: only what every authenticated user
    /// may do (discovery, `/healthz`...).
    Nobody,
    /// `stratus-prometheus`, a scraper; bound to nothing until a test grants it something.
    Prometheus,
    /// Authenticates like the ServiceAccount `kube-system/aws-load-balancer-controller`: a
    /// second controller beside the CCM whose writes the audit log tells apart.
    LoadBalancerController,
}

impl Identity {
    /// Every identity; each gets a token and a kubeconfig.
    pub const ALL: &'static [Identity] = &[
        Identity::Admin,
        Identity::CloudControllerManager,
        Identity::Nobody,
        Identity::Prometheus,
        Identity::LoadBalancerController,
    ];

    /// The user name the apiserver knows it by.
    pub fn username(self) -> &'static str {
        match self {
            Identity::Admin => "stratus-admin",
            Identity::CloudControllerManager => {
                "system:serviceaccount:kube-system:cloud-controller-manager"
            }
            Identity::Nobody => "stratus-nobody",
            Identity::Prometheus => "stratus-prometheus",
            Identity::LoadBalancerController => {
                "system:serviceaccount:kube-system:aws-load-balancer-controller"
            }
        }
    }

    /// Its groups.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            Identity::Admin => &["system:masters"],
            Identity::CloudControllerManager | Identity::LoadBalancerController => &[
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated",
            ],
            Identity::Nobody | Identity::Prometheus => &["system:authenticated"],
        }
    }

    /// A short name used in file names.
    pub fn slug(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::CloudControllerManager => "cloud-controller-manager",
            Identity::Nobody => "nobody",
            Identity::Prometheus => "prometheus",
            Identity::LoadBalancerController => "aws-load-balancer-controller",
        }
    }
}

/// A running cluster. Dropping it stops etcd and kube-apiserver and, when it made its own
/// directory, deletes it (unless `STRATUS_KEEP_ENV=1`).
pub struct KubeCluster {
    dir: PathBuf,
    remove_dir: bool,
    released: bool,
    apiserver_url: String,
    etcd_url: String,
    audit_log: PathBuf,
    tokens: BTreeMap<Identity, String>,
    etcd: Proc,
    apiserver: Proc,
}

const ADMISSION_PLUGINS_DISABLED: &str = "ServiceAccount";

/// Audit policy: metadata of write requests only, one event per request.
pub(crate) const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
# Reads of the DVP parent's VirtualMachines: what the tenant's components ask of their cloud.
- level: Metadata
  verbs: [get, list]
  resources:
  - group: virtualization.deckhouse.io
    resources: [virtualmachines]
- level: None
";

impl KubeCluster {
    /// Installs the tools if needed and starts a cluster in a fresh temporary directory; returns
    /// once the apiserver is ready and the `default` and `kube-system` namespaces exist.
    pub async fn start() -> Result<KubeCluster> {
        let dir = std::env::temp_dir().join(format!(
            "stratus-cluster-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        let mut cluster = KubeCluster::launch(&dir, Lifetime::Attached).await?;
        cluster.remove_dir = true;
        Ok(cluster)
    }

    /// Starts a cluster with its files in `dir` (created if needed).
    pub(crate) async fn launch(dir: &Path, lifetime: Lifetime) -> Result<KubeCluster> {
        let paths = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        // Ports are picked by binding port 0 and released before the children bind them, so
        // another process may grab one in between; then a fresh set of ports is tried.
        let mut attempt = 1;
        loop {
            match KubeCluster::launch_once(dir, lifetime, &paths).await {
                Err(err) if attempt < 3 && is_port_conflict(&err) => {
                    eprintln!("stratus-testenv: port conflict, retrying: {err:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn launch_once(dir: &Path, lifetime: Lifetime, paths: &Paths) -> Result<KubeCluster> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .with_context(|| format!("resolving {}", dir.display()))?;
        let etcd_data = dir.join("etcd-data");
        if etcd_data.exists() {
            std::fs::remove_dir_all(&etcd_data)
                .with_context(|| format!("removing stale {}", etcd_data.display()))?;
        }
        let tokens = Identity::ALL
            .iter()
            .map(|&identity| Ok((identity, random_token()?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        let listeners = free_listeners(3)?;
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| Ok(l.local_addr()?.port()))
            .collect::<Result<_>>()?;
        let [etcd_port, etcd_peer_port, apiserver_port] = ports[..] else {
            unreachable!("three ports")
        };
        // Free the ports right before the children bind them.
        drop(listeners);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let apiserver_url = format!("https://127.0.0.1:{apiserver_port}");
        let audit_log = dir.join("audit.log");
        let files = write_config_files(&dir, &tokens, &apiserver_url)?;
        // A `Proc` stops its process when dropped, so an error below cleans up what started.
        let etcd = Proc::spawn(
            "etcd",
            &paths.etcd,
            etcd_args(&etcd_data, &etcd_url, etcd_peer_port),
            dir.join("etcd.log"),
            lifetime,
        )?;
        let apiserver = Proc::spawn(
            "kube-apiserver",
            &paths.kube_apiserver,
            apiserver_args(&files, &etcd_url, apiserver_port, &audit_log),
            dir.join("kube-apiserver.log"),
            lifetime,
        )?;
        let mut cluster = KubeCluster {
            dir,
            remove_dir: false,
            released: false,
            apiserver_url,
            etcd_url,
            audit_log,
            tokens,
            etcd,
            apiserver,
        };
        cluster.wait_ready().await?;
        Ok(cluster)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let timeout = start_timeout();
        let http = HttpClient::new();
        let etcd_health = format!("{}/health", self.etcd_url);
        let admin_kubeconfig = self.kubeconfig(Identity::Admin);
        let etcd = self.etcd.wait_ready(timeout, || async {
            let (status, body) = http.get(&etcd_health).await?;
            anyhow::ensure!(
                status.is_success() && String::from_utf8_lossy(&body).contains("true"),
                "etcd /health: {status} {}",
                String::from_utf8_lossy(&body)
            );
            Ok(())
        });
        let apiserver = wait_apiserver_ready(&mut self.apiserver, &admin_kubeconfig, timeout);
        tokio::try_join!(etcd, apiserver)?;
        Ok(())
    }

    /// The cluster's directory (logs, kubeconfigs, audit log, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `https://127.0.0.1:PORT` (self-signed certificate).
    pub fn apiserver_url(&self) -> &str {
        &self.apiserver_url
    }

    /// The kubeconfig file for `identity` (token auth, `insecure-skip-tls-verify: true`).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        kubeconfig_path(&self.dir, identity)
    }

    /// The bearer token of `identity`.
    pub fn token(&self, identity: Identity) -> &str {
        &self.tokens[&identity]
    }

    /// A kube client authenticated as `identity`.
    pub async fn kube_client(&self, identity: Identity) -> Result<kube::Client> {
        kube_client(&self.kubeconfig(identity)).await
    }

    /// Completed write requests (create/update/patch/delete/deletecollection) made by
    /// `username`, from the apiserver audit log, leaving out leader-election Lease renewals
    /// (a fixed cost per retry period, not work). The log is written before the response is
    /// sent, so a write is counted as soon as the client saw its response.
    pub fn kube_writes_by(&self, username: &str) -> Result<u64> {
        self.count_writes(|event| {
            let lease = event
                .object_ref
                .as_ref()
                .is_some_and(|o| o.resource == "leases");
            event.user.username == username && !lease
        })
    }

    /// Completed write requests made by `username` to `resource` (e.g. `tokenreviews`), from the
    /// audit log (see [`KubeCluster::kube_writes_by`]).
    pub fn kube_writes_to(&self, username: &str, resource: &str) -> Result<u64> {
        self.count_writes(|event| {
            event.user.username == username
                && event
                    .object_ref
                    .as_ref()
                    .is_some_and(|o| o.resource == resource)
        })
    }

    /// Completed write requests made by `username` to the object `name` of `resource`
    /// (subresources included), from the audit log.
    pub fn kube_writes_to_object(&self, username: &str, resource: &str, name: &str) -> Result<u64> {
        self.count_writes(|event| {
            event.user.username == username
                && event
                    .object_ref
                    .as_ref()
                    .is_some_and(|o| o.resource == resource && o.name == name)
        })
    }

    /// Completed `get` and `list` requests `username` made of `resource` (only the parent's
    /// VirtualMachines are recorded: see the audit policy).
    pub fn kube_reads_by(&self, username: &str, resource: &str) -> Result<u64> {
        crate::core::audit::reads_by(&self.audit_log, username, resource)
    }

    /// The audit log's path.
    pub fn audit_log(&self) -> &std::path::Path {
        &self.audit_log
    }

    fn count_writes(&self, matches: impl Fn(&AuditEvent) -> bool) -> Result<u64> {
        let text = match std::fs::read_to_string(&self.audit_log) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(err) => {
                return Err(err).with_context(|| format!("reading {}", self.audit_log.display()))
            }
        };
        let mut writes = 0;
        // A line being written concurrently may be incomplete and is skipped.
        for event in text
            .lines()
            .filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok())
        {
            if event.stage == "ResponseComplete"
                && crate::core::audit::WRITE_VERBS.contains(&event.verb.as_str())
                && matches(&event)
            {
                writes += 1;
            }
        }
        Ok(writes)
    }

    /// Stops kube-apiserver and starts it again on the same port with the same etcd; returns
    /// once it is ready again.
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.stop_apiserver();
        self.start_apiserver().await
    }

    /// Stops kube-apiserver (etcd keeps running) until [`KubeCluster::start_apiserver`].
    pub fn stop_apiserver(&mut self) {
        stop_all(&mut [&mut self.apiserver], Duration::from_secs(15));
    }

    /// Starts the stopped kube-apiserver again on the same port with the same etcd; returns
    /// once it is ready.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        self.apiserver.start()?;
        let kubeconfig = self.kubeconfig(Identity::Admin);
        wait_apiserver_ready(&mut self.apiserver, &kubeconfig, start_timeout()).await
    }

    /// `(name, pid)` of the child processes.
    pub(crate) fn pids(&self) -> Vec<(&'static str, u32)> {
        [&self.etcd, &self.apiserver]
            .into_iter()
            .filter_map(|p| Some((p.name(), p.pid()?)))
            .collect()
    }

    /// Leaves the processes and the directory in place when `self` is dropped (`testenv up`).
    pub(crate) fn release(mut self) {
        self.released = true;
        self.etcd.release();
        self.apiserver.release();
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // etcd last: its graceful stop waits for the apiserver's watch streams to end, and the
        // apiserver's waits for etcd; together they would both sit out the grace period.
        stop_all(&mut [&mut self.apiserver], Duration::from_secs(5));
        stop_all(&mut [&mut self.etcd], Duration::from_secs(5));
        crate::core::util::remove_env_dir(&self.dir, self.remove_dir);
    }
}

#[derive(serde::Deserialize)]
struct AuditEvent {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    user: AuditUser,
    #[serde(default, rename = "objectRef")]
    object_ref: Option<AuditObjectRef>,
}

#[derive(serde::Deserialize, Default)]
struct AuditObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    name: String,
}

#[derive(serde::Deserialize, Default)]
struct AuditUser {
    #[serde(default)]
    username: String,
}

/// Files the apiserver reads.
struct ConfigFiles {
    cert_dir: PathBuf,
    token_file: PathBuf,
    audit_policy: PathBuf,
    sa_private_key: PathBuf,
    sa_public_key: PathBuf,
}

fn write_config_files(
    dir: &Path,
    tokens: &BTreeMap<Identity, String>,
    apiserver_url: &str,
) -> Result<ConfigFiles> {
    let files = ConfigFiles {
        cert_dir: dir.join("certs"),
        token_file: dir.join("tokens.csv"),
        audit_policy: dir.join("audit-policy.yaml"),
        sa_private_key: dir.join("sa.key"),
        sa_public_key: dir.join("sa.pub"),
    };
    std::fs::create_dir_all(&files.cert_dir)?;

    // token,user,uid,"group1,group2"
    let mut csv = String::new();
    for (identity, token) in tokens {
        let username = identity.username();
        let groups = identity.groups().join(",");
        writeln!(csv, "{token},{username},{username},\"{groups}\"")?;
    }
    write_private(&files.token_file, &csv)?;
    std::fs::write(&files.audit_policy, AUDIT_POLICY)?;

    let key = rcgen::KeyPair::generate().context("generating the service account key")?;
    write_private(&files.sa_private_key, &key.serialize_pem())?;
    std::fs::write(&files.sa_public_key, key.public_key_pem())?;

    for (identity, token) in tokens {
        write_private(
            &kubeconfig_path(dir, *identity),
            &kubeconfig_yaml(apiserver_url, token),
        )?;
    }
    Ok(files)
}

fn kubeconfig_path(dir: &Path, identity: Identity) -> PathBuf {
    dir.join(format!("kubeconfig-{}.yaml", identity.slug()))
}

fn kubeconfig_yaml(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: stratus
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: stratus
  user:
    token: {token}
contexts:
- name: stratus
  context:
    cluster: stratus
    user: stratus
    namespace: default
current-context: stratus
"
    )
}

pub(crate) fn write_private(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

pub(crate) fn etcd_args(data_dir: &Path, client_url: &str, peer_port: u16) -> Vec<OsString> {
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let mut args: Vec<OsString> = vec![
        "--name=stratus".into(),
        "--data-dir".into(),
        data_dir.into(),
    ];
    args.extend(
        [
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=stratus={peer_url}"),
            // Test data is thrown away: skip fsync, it dominates etcd latency on slow disks.
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ]
        .map(OsString::from),
    );
    args
}

fn apiserver_args(
    files: &ConfigFiles,
    etcd_url: &str,
    port: u16,
    audit_log: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut flag = |name: &str, value: &dyn AsRef<std::ffi::OsStr>| {
        let mut arg = OsString::from(format!("--{name}="));
        arg.push(value.as_ref());
        args.push(arg);
    };
    flag("etcd-servers", &etcd_url);
    flag("bind-address", &"127.0.0.1");
    flag("advertise-address", &"127.0.0.1");
    flag("secure-port", &port.to_string());
    flag("cert-dir", &files.cert_dir);
    flag("token-auth-file", &files.token_file);
    flag("authorization-mode", &"RBAC");
    flag("service-account-issuer", &"https://kubernetes.default.svc");
    flag("service-account-key-file", &files.sa_public_key);
    flag("service-account-signing-key-file", &files.sa_private_key);
    flag("service-cluster-ip-range", &"10.96.0.0/16");
    // As clusters that run CSI node plugins are (kubeadm's default): the charts' node plugins are
    // privileged, and the chart test has this apiserver accept them.
    flag("allow-privileged", &"true");
    flag("audit-policy-file", &files.audit_policy);
    flag("audit-log-path", &audit_log);
    // Write each event before the response goes out, so counts are exact once a call returns.
    flag("audit-log-mode", &"blocking");
    // Without kube-controller-manager no `default` ServiceAccount is ever created, and the
    // ServiceAccount admission plugin would reject every pod.
    flag("disable-admission-plugins", &ADMISSION_PLUGINS_DISABLED);
    // Fewer moving parts and faster startup on small machines.
    flag("enable-priority-and-fairness", &"false");
    flag("profiling", &"false");
    args
}

pub(crate) async fn kube_client(kubeconfig: &Path) -> Result<kube::Client> {
    let kubeconfig_data = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig_data, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", kubeconfig.display()))?;
    Ok(kube::Client::try_from(config)?)
}

/// Waits for `/readyz` and for the `default` and `kube-system` namespaces.
pub(crate) async fn wait_apiserver_ready(
    apiserver: &mut Proc,
    admin_kubeconfig: &Path,
    timeout: Duration,
) -> Result<()> {
    let client = kube_client(admin_kubeconfig).await?;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    apiserver
        .wait_ready(timeout, || async {
            let probe = async {
                let request = http::Request::get("/readyz").body(kube::client::Body::empty())?;
                let response = client.send(request).await.context("/readyz")?;
                let status = response.status();
                if !status.is_success() {
                    let body = response.into_body().collect_bytes().await?;
                    let failing: Vec<&str> = std::str::from_utf8(&body)
                        .unwrap_or_default()
                        .lines()
                        .filter(|line| line.starts_with("[-]"))
                        .collect();
                    bail!("/readyz: {status}; failing: {}", failing.join(", "));
                }
                for name in ["default", "kube-system"] {
                    namespaces
                        .get(name)
                        .await
                        .with_context(|| format!("namespace {name}"))?;
                }
                anyhow::Ok(())
            };
            tokio::time::timeout(Duration::from_secs(5), probe)
                .await
                .context("no answer within 5s")?
        })
        .await
}

pub(crate) fn start_timeout() -> Duration {
    std::env::var("STRATUS_START_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(120), Duration::from_secs)
}

/// How long an applied CRD may take to become established.
const ESTABLISH_DEADLINE: Duration = Duration::from_secs(30);

/// Waits until the CRD `name` is established, with a deadline.
pub async fn wait_established(client: &kube::Client, name: &str) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + ESTABLISH_DEADLINE;
    loop {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "CRD {name} not established within {} s",
                ESTABLISH_DEADLINE.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
