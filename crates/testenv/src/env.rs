//! The test environment: etcd, kube-apiserver (RBAC, token auth, audit log) and moto behind the
//! counting proxy, each on a free 127.0.0.1 port, with a kubeconfig per [`Identity`].
//!
//! [`TestEnv::start`] owns its processes (killed on drop). The `testenv up` command starts the
//! very same stack detached (`Launch::Detached`) and leaves it running.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::TcpListener as StdTcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::install::{ensure_installed, Paths};
use crate::process::{stop_all, Lifetime, Proc};
use crate::proxy::{self, Counters};
use crate::proxy_control::ProxyControl;
use crate::util::{free_listeners, random_token, HttpClient};

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
}

impl Identity {
    /// Every identity; each gets a token and a kubeconfig.
    pub const ALL: &'static [Identity] = &[
        Identity::Admin,
        Identity::CloudControllerManager,
        Identity::Nobody,
        Identity::Prometheus,
    ];

    pub fn username(self) -> &'static str {
        match self {
            Identity::Admin => "stratus-admin",
            Identity::CloudControllerManager => {
                "system:serviceaccount:kube-system:cloud-controller-manager"
            }
            Identity::Nobody => "stratus-nobody",
            Identity::Prometheus => "stratus-prometheus",
        }
    }

    pub fn groups(self) -> &'static [&'static str] {
        match self {
            Identity::Admin => &["system:masters"],
            Identity::CloudControllerManager => &[
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
        }
    }
}

/// How the processes relate to the caller.
pub(crate) enum Launch {
    /// Children of this process, killed on drop; the proxy runs in-process.
    Owned,
    /// Survive this process (`testenv up`); the proxy runs as `PROXY_EXE proxy ...`.
    Detached { proxy_exe: PathBuf },
}

/// Where the AWS proxy runs.
enum ProxyRunner {
    InProcess(ProxyThread),
    Process(Proc),
}

/// A running environment. Dropping it stops the processes and deletes its directory (unless
/// `STRATUS_KEEP_ENV=1`, or it was started by `testenv up` and released).
pub struct TestEnv {
    dir: PathBuf,
    remove_dir: bool,
    released: bool,
    apiserver_url: String,
    etcd_url: String,
    aws_endpoint: String,
    moto_endpoint: String,
    audit_log: PathBuf,
    tokens: BTreeMap<Identity, String>,
    etcd: Proc,
    apiserver: Proc,
    moto: Proc,
    proxy: ProxyRunner,
}

const ADMISSION_PLUGINS_DISABLED: &str = "ServiceAccount";

/// Audit policy: metadata of write requests only, one event per request.
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
";

const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

impl TestEnv {
    /// Installs the tools if needed (see [`ensure_installed`]) and starts etcd, kube-apiserver,
    /// moto and the counting proxy in a fresh temporary directory. Returns once the apiserver is
    /// ready and the `default` and `kube-system` namespaces exist.
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
        let paths = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        // Ports are picked by binding port 0 and released before the children bind them, so
        // another process may grab one in between; then a fresh set of ports is tried.
        let mut attempt = 1;
        loop {
            match TestEnv::launch_once(dir, &launch, &paths).await {
                Err(err) if attempt < 3 && is_port_conflict(&err) => {
                    eprintln!("stratus-testenv: port conflict, retrying: {err:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn launch_once(dir: &Path, launch: &Launch, paths: &Paths) -> Result<TestEnv> {
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
        let mut listeners = free_listeners(5)?;
        let proxy_listener = listeners.pop().expect("five listeners");
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| Ok(l.local_addr()?.port()))
            .collect::<Result<_>>()?;
        let [etcd_port, etcd_peer_port, apiserver_port, moto_port] = ports[..] else {
            unreachable!("four ports")
        };
        let proxy_port = proxy_listener.local_addr()?.port();
        // Free the ports right before the children bind them.
        drop(listeners);

        let lifetime = match launch {
            Launch::Owned => Lifetime::Attached,
            Launch::Detached { .. } => Lifetime::Detached,
        };
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let moto_endpoint = format!("http://127.0.0.1:{moto_port}");
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
        let moto = Proc::spawn(
            "moto",
            &paths.moto_server,
            ["-H", "127.0.0.1", "-p", &moto_port.to_string()]
                .map(OsString::from)
                .to_vec(),
            dir.join("moto.log"),
            lifetime,
        )?;
        let apiserver = Proc::spawn(
            "kube-apiserver",
            &paths.kube_apiserver,
            apiserver_args(&files, &etcd_url, apiserver_port, &audit_log),
            dir.join("kube-apiserver.log"),
            lifetime,
        )?;
        let proxy = match launch {
            Launch::Owned => {
                ProxyRunner::InProcess(ProxyThread::start(proxy_listener, moto_endpoint.clone())?)
            }
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

        // From here on, dropping `env` (e.g. on a readiness error) stops everything.
        let mut env = TestEnv {
            apiserver_url,
            etcd_url,
            aws_endpoint: format!("http://127.0.0.1:{proxy_port}"),
            moto_endpoint,
            audit_log,
            tokens,
            dir,
            remove_dir: false,
            released: false,
            etcd,
            apiserver,
            moto,
            proxy,
        };
        env.wait_ready().await?;
        Ok(env)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let timeout = start_timeout();
        let http = HttpClient::new();
        let etcd_health = format!("{}/health", self.etcd_url);
        let moto_probe = format!("{}/moto-api/", self.moto_endpoint);
        let proxy_probe = format!("{}{}", self.aws_endpoint, proxy::COUNTS_PATH);
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
        let moto = self.moto.wait_ready(timeout, || async {
            // Any HTTP answer means moto is serving.
            http.get(&moto_probe).await.map(drop)
        });
        let proxy = async {
            match &mut self.proxy {
                ProxyRunner::InProcess(_) => Ok(()),
                ProxyRunner::Process(proc) => {
                    proc.wait_ready(timeout, || async {
                        let (status, _) = http.get(&proxy_probe).await?;
                        anyhow::ensure!(status.is_success(), "proxy answered {status}");
                        Ok(())
                    })
                    .await
                }
            }
        };
        let apiserver = wait_apiserver_ready(&mut self.apiserver, &admin_kubeconfig, timeout);
        tokio::try_join!(etcd, moto, proxy, apiserver)?;
        Ok(())
    }

    /// The environment's directory (logs, kubeconfigs, audit log, etcd data).
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

    /// `http://127.0.0.1:PORT` of the counting proxy in front of moto; point AWS SDKs here.
    pub fn aws_endpoint(&self) -> &str {
        &self.aws_endpoint
    }

    /// moto itself, bypassing the counters (for test setup that should not be counted).
    pub fn moto_endpoint(&self) -> &str {
        &self.moto_endpoint
    }

    /// Environment variables for a process acting as `identity` against this environment.
    pub fn env_vars(&self, identity: Identity) -> Vec<(String, String)> {
        let mut vars = vec![(
            "KUBECONFIG".to_owned(),
            self.kubeconfig(identity).display().to_string(),
        )];
        vars.extend(self.proxy_control().aws_env_vars());
        vars
    }

    /// The AWS proxy's control endpoints.
    pub fn proxy_control(&self) -> ProxyControl<'_> {
        ProxyControl {
            endpoint: &self.aws_endpoint,
        }
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
    /// audit log (see [`TestEnv::kube_writes_by`]).
    pub fn kube_writes_to(&self, username: &str, resource: &str) -> Result<u64> {
        self.count_writes(|event| {
            event.user.username == username
                && event
                    .object_ref
                    .as_ref()
                    .is_some_and(|o| o.resource == resource)
        })
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
                && WRITE_VERBS.contains(&event.verb.as_str())
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

    /// Stops kube-apiserver (etcd keeps running) until [`TestEnv::start_apiserver`].
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

    /// `(name, pid)` of the child processes (the in-process proxy has none).
    pub(crate) fn pids(&self) -> Vec<(&'static str, u32)> {
        let mut procs = vec![&self.etcd, &self.moto, &self.apiserver];
        if let ProxyRunner::Process(proxy) = &self.proxy {
            procs.push(proxy);
        }
        procs
            .into_iter()
            .filter_map(|p| Some((p.name(), p.pid()?)))
            .collect()
    }

    /// Leaves the processes and the directory in place when `self` is dropped (`testenv up`).
    pub(crate) fn release(mut self) {
        self.released = true;
        for proc in [&mut self.etcd, &mut self.moto, &mut self.apiserver] {
            proc.release();
        }
        if let ProxyRunner::Process(proxy) = &mut self.proxy {
            proxy.release();
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // etcd last: its graceful stop waits for the apiserver's watch streams to end, and the
        // apiserver's waits for etcd; together they would both sit out the grace period.
        let mut procs = vec![&mut self.apiserver, &mut self.moto];
        if let ProxyRunner::Process(proxy) = &mut self.proxy {
            procs.push(proxy);
        }
        stop_all(&mut procs, Duration::from_secs(5));
        stop_all(&mut [&mut self.etcd], Duration::from_secs(5));
        if let ProxyRunner::InProcess(proxy) = &mut self.proxy {
            proxy.stop();
        }
        if std::env::var_os("STRATUS_KEEP_ENV").is_some_and(|v| v == "1") {
            eprintln!("stratus-testenv: kept {}", self.dir.display());
        } else if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
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

fn write_private(path: &Path, contents: &str) -> Result<()> {
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

fn etcd_args(data_dir: &Path, client_url: &str, peer_port: u16) -> Vec<OsString> {
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

async fn kube_client(kubeconfig: &Path) -> Result<kube::Client> {
    let kubeconfig_data = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig_data, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", kubeconfig.display()))?;
    Ok(kube::Client::try_from(config)?)
}

/// Waits for `/readyz` and for the `default` and `kube-system` namespaces.
async fn wait_apiserver_ready(
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

fn start_timeout() -> Duration {
    std::env::var("STRATUS_START_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(120), Duration::from_secs)
}

/// Runs the counting proxy on a dedicated thread with its own runtime, so it keeps serving
/// whatever the caller's runtime does (e.g. a current-thread test runtime blocked in a sync
/// call, or a runtime shutting down before the env is dropped).
pub(crate) struct ProxyThread {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ProxyThread {
    pub(crate) fn start(listener: StdTcpListener, upstream: String) -> Result<ProxyThread> {
        listener.set_nonblocking(true)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let (started, startup) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("stratus-aws-proxy".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = started.send(Err(err));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => {
                            let _ = started.send(Err(err));
                            return;
                        }
                    };
                    let _ = started.send(Ok(()));
                    tokio::select! {
                        result = proxy::serve(listener, upstream, Arc::new(Counters::new())) => {
                            if let Err(err) = result {
                                eprintln!("stratus-testenv: aws proxy stopped: {err:#}");
                            }
                        }
                        _ = stopped => {}
                    }
                });
            })?;
        let mut proxy = ProxyThread {
            shutdown: Some(shutdown),
            thread: Some(thread),
        };
        match startup.recv() {
            Ok(Ok(())) => Ok(proxy),
            Ok(Err(err)) => Err(err).context("starting the aws proxy thread"),
            Err(_) => {
                proxy.stop();
                bail!("the aws proxy thread died while starting")
            }
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProxyThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a start failed because a picked port was taken in the meantime (Go: "bind: address
/// already in use", Python: "[Errno 98] Address already in use").
pub(crate) fn is_port_conflict(err: &anyhow::Error) -> bool {
    format!("{err:#}")
        .to_ascii_lowercase()
        .contains("address already in use")
}
