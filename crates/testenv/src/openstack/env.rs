//! The OpenStack cloud of the environment: a real Keystone (uWSGI, SQLite, fernet tokens,
//! copied from a bootstrapped template), the simulators of Nova, Neutron, Cinder, Glance and
//! Octavia ([`stratus_openstack_sim`]), and the counting/fault proxy in front of both (the
//! OpenStack protocol of [`crate::core::proxy`], [`super::proxy`]), each on a free 127.0.0.1 port.
//!
//! Per environment, through Keystone's REST API: a domain `stratus`, a project
//! `stratus-cluster`, the CCM's user `stratus-ccm` (role `member` on the project), and the
//! catalog — `compute`, `network`, `load-balancer`, `block-storage` and `volumev3`, `image` —
//! with public, internal and admin endpoints pointing at the proxy. Keystone's own endpoints are
//! moved to the proxy too, so every client request is counted.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use stratus_openstack_sim::{
    Auth, KeystoneValidator, ServiceCredentials, SimConfig, SimHandle, SimServer,
};

use super::admin::Setup;
use crate::aws::ProxyControl;
use crate::core::cluster::start_timeout;
use crate::core::process::Launch;
use crate::core::process::{Lifetime, Proc};
use crate::core::proxy::{self, ProxyThread};
use crate::core::util::{
    free_listeners, is_port_conflict, random_token, remove_env_dir, HttpClient,
};
use crate::tools::keystone::{ensure_keystone, Keystone, KeystoneConfig, ADMIN, REGION};

/// The domain the CCM's user and project live in.
pub const DOMAIN: &str = "stratus";
/// The CCM's project.
pub const PROJECT: &str = "stratus-cluster";
/// The CCM's user.
pub const CCM_USER: &str = "stratus-ccm";

/// How an OpenStack environment is set up.
#[derive(Debug, Clone)]
pub struct OpenStackOptions {
    /// Keystone's `[token] expiration` (default one hour; a few seconds to exercise
    /// re-authentication).
    pub token_expiration: Duration,
    /// Availability zones (empty: `nova`).
    pub zones: Vec<String>,
}

impl Default for OpenStackOptions {
    fn default() -> OpenStackOptions {
        OpenStackOptions {
            token_expiration: Duration::from_secs(3600),
            zones: Vec::new(),
        }
    }
}

/// Password credentials of a Keystone user, as clients take them. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpenStackCredentials {
    /// `http://127.0.0.1:PORT/identity/v3` (through the proxy).
    pub auth_url: String,
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// Project name.
    pub project_name: String,
    /// Project id.
    pub project_id: String,
    /// The user's domain name.
    pub user_domain_name: String,
    /// The project's domain name.
    pub project_domain_name: String,
    /// Region.
    pub region: String,
    /// Endpoint interface (`public`).
    pub interface: String,
}

impl std::fmt::Debug for OpenStackCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackCredentials")
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("project_name", &self.project_name)
            .field("project_id", &self.project_id)
            .field("user_domain_name", &self.user_domain_name)
            .field("project_domain_name", &self.project_domain_name)
            .field("region", &self.region)
            .field("interface", &self.interface)
            .finish()
    }
}

impl OpenStackCredentials {
    /// The `OS_*` variables of these credentials (openstacksdk, gophercloud, the CLI).
    pub fn env_vars(&self) -> Vec<(String, String)> {
        [
            ("OS_AUTH_URL", &self.auth_url),
            ("OS_USERNAME", &self.username),
            ("OS_PASSWORD", &self.password),
            ("OS_PROJECT_NAME", &self.project_name),
            ("OS_USER_DOMAIN_NAME", &self.user_domain_name),
            ("OS_PROJECT_DOMAIN_NAME", &self.project_domain_name),
            ("OS_REGION_NAME", &self.region),
            ("OS_INTERFACE", &self.interface),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .chain([("OS_IDENTITY_API_VERSION".to_owned(), "3".to_owned())])
        .collect()
    }

    /// An OCCM `cloud.conf` with these credentials (`[Global]` only).
    pub fn cloud_conf(&self) -> String {
        format!(
            "[Global]\nauth-url = {}\nusername = {}\npassword = {}\ntenant-name = {}\ndomain-name = {}\nregion = {}\n",
            self.auth_url, self.username, self.password, self.project_name, self.user_domain_name, self.region
        )
    }
}

/// The simulators' settings, passed to a detached `testenv openstack-sim` in a file.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct SimSettings {
    pub(crate) project_id: String,
    pub(crate) user_id: String,
    pub(crate) zones: Vec<String>,
    pub(crate) keystone_url: String,
    pub(crate) admin_password: String,
}

impl SimSettings {
    pub(crate) fn into_config(self) -> SimConfig {
        SimConfig {
            project_id: self.project_id,
            user_id: self.user_id,
            zones: self.zones,
            auth: Auth::Keystone(Box::new(KeystoneValidator::new(ServiceCredentials {
                keystone_url: self.keystone_url,
                username: ADMIN.to_owned(),
                password: self.admin_password,
                project_name: ADMIN.to_owned(),
            }))),
        }
    }
}

enum SimRunner {
    InProcess(SimServer),
    Process(Proc),
}

enum ProxyRunner {
    InProcess(ProxyThread),
    Process(Proc),
}

/// Keystone, the simulators and the proxy. Dropping it stops them and, when it made its own
/// directory, deletes it (unless `STRATUS_KEEP_ENV=1`).
pub struct OpenStackEnv {
    dir: PathBuf,
    remove_dir: bool,
    released: bool,
    endpoint: String,
    keystone_url: String,
    credentials: OpenStackCredentials,
    admin: OpenStackCredentials,
    cloud_conf: PathBuf,
    // Stopped in this order: proxy, simulators, Keystone.
    proxy: Option<ProxyRunner>,
    sim: Option<SimRunner>,
    keystone: Proc,
    keystone_tool: Keystone,
}

impl OpenStackEnv {
    /// Installs Keystone if needed and starts the cloud with default options in a fresh
    /// temporary directory.
    pub async fn start() -> Result<OpenStackEnv> {
        OpenStackEnv::start_with(OpenStackOptions::default()).await
    }

    /// Like [`OpenStackEnv::start`] with `options` (e.g. a short token expiry).
    pub async fn start_with(options: OpenStackOptions) -> Result<OpenStackEnv> {
        let dir = std::env::temp_dir().join(format!(
            "stratus-openstack-env-{}-{}",
            std::process::id(),
            &random_token()?[..8]
        ));
        match OpenStackEnv::launch(&dir, &Launch::Owned, &options).await {
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

    /// Starts the cloud with its files in `dir`, retrying on a port conflict.
    pub(crate) async fn launch(
        dir: &Path,
        launch: &Launch,
        options: &OpenStackOptions,
    ) -> Result<OpenStackEnv> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut attempt = 1;
        loop {
            match OpenStackEnv::launch_once(dir, launch, options).await {
                Err(err) if attempt < 3 && is_port_conflict(&err) => {
                    eprintln!("stratus-testenv: port conflict, retrying: {err:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn launch_once(
        dir: &Path,
        launch: &Launch,
        options: &OpenStackOptions,
    ) -> Result<OpenStackEnv> {
        let tool = tokio::task::spawn_blocking(ensure_keystone)
            .await
            .context("keystone install task panicked")??;
        let mut listeners = free_listeners(3)?;
        let proxy_listener = listeners.pop().expect("three listeners");
        let sim_listener = listeners.pop().expect("three listeners");
        let keystone_port = listeners[0].local_addr()?.port();
        let sim_port = sim_listener.local_addr()?.port();
        let proxy_port = proxy_listener.local_addr()?.port();
        drop(listeners);
        let endpoint = format!("http://127.0.0.1:{proxy_port}");
        let keystone_base = format!("http://127.0.0.1:{keystone_port}");
        let keystone_url = format!("{keystone_base}/identity/v3");
        let sim_url = format!("http://127.0.0.1:{sim_port}");

        let conf = tool.instantiate(
            &dir.join("keystone"),
            &KeystoneConfig {
                token_expiration: options.token_expiration,
            },
        )?;
        let mut keystone = Proc::spawn(
            "keystone",
            &tool.uwsgi,
            tool.uwsgi_args(keystone_port, &conf),
            dir.join("keystone.log"),
            launch.lifetime(),
        )?;
        let http = HttpClient::new();
        let probe = format!("{keystone_url}/");
        keystone
            .wait_ready(start_timeout(), || async {
                let (status, _) = http.get(&probe).await?;
                anyhow::ensure!(status.is_success(), "keystone answered {status}");
                Ok(())
            })
            .await?;

        let setup = Setup::new(&keystone_url, &tool.admin_password).await?;
        let ccm_password = random_token()?;
        let ids = setup.tenant(&ccm_password).await?;
        setup
            .catalog(&endpoint, &format!("{endpoint}/identity/v3"))
            .await?;

        let settings = SimSettings {
            project_id: ids.project_id.clone(),
            user_id: ids.user_id.clone(),
            zones: options.zones.clone(),
            keystone_url: keystone_url.clone(),
            admin_password: tool.admin_password.clone(),
        };
        let sim = match launch {
            Launch::Owned => {
                SimRunner::InProcess(SimServer::start(sim_listener, settings.into_config())?)
            }
            Launch::Detached { proxy_exe } => {
                drop(sim_listener);
                let file = dir.join("openstack-sim.json");
                write_private(&file, &serde_json::to_vec(&settings)?)?;
                SimRunner::Process(Proc::spawn(
                    "openstack-sim",
                    proxy_exe,
                    vec![
                        "openstack-sim".into(),
                        "--listen".into(),
                        format!("127.0.0.1:{sim_port}").into(),
                        "--settings".into(),
                        file.into_os_string(),
                    ],
                    dir.join("openstack-sim.log"),
                    Lifetime::Detached,
                )?)
            }
        };
        let proxy = match launch {
            Launch::Owned => ProxyRunner::InProcess(ProxyThread::start(
                proxy_listener,
                sim_url.clone(),
                super::proxy::openstack(&keystone_base)?,
            )?),
            Launch::Detached { proxy_exe } => {
                drop(proxy_listener);
                ProxyRunner::Process(Proc::spawn(
                    "openstack-proxy",
                    proxy_exe,
                    [
                        "proxy",
                        "--listen",
                        &format!("127.0.0.1:{proxy_port}"),
                        "--upstream",
                        &sim_url,
                        "--protocol",
                        "openstack",
                        "--keystone-upstream",
                        &keystone_base,
                    ]
                    .map(OsString::from)
                    .to_vec(),
                    dir.join("openstack-proxy.log"),
                    Lifetime::Detached,
                )?)
            }
        };
        let credentials = OpenStackCredentials {
            auth_url: format!("{endpoint}/identity/v3"),
            username: CCM_USER.to_owned(),
            password: ccm_password,
            project_name: PROJECT.to_owned(),
            project_id: ids.project_id,
            user_domain_name: DOMAIN.to_owned(),
            project_domain_name: DOMAIN.to_owned(),
            region: REGION.to_owned(),
            interface: "public".to_owned(),
        };
        let admin = OpenStackCredentials {
            username: ADMIN.to_owned(),
            password: tool.admin_password.clone(),
            project_name: ADMIN.to_owned(),
            project_id: setup.admin_project.clone(),
            user_domain_name: "Default".to_owned(),
            project_domain_name: "Default".to_owned(),
            ..credentials.clone()
        };
        let cloud_conf = dir.join("cloud.conf");
        write_private(&cloud_conf, credentials.cloud_conf().as_bytes())?;
        let mut env = OpenStackEnv {
            dir: dir.to_path_buf(),
            remove_dir: false,
            released: false,
            endpoint,
            keystone_url,
            credentials,
            admin,
            cloud_conf,
            proxy: Some(proxy),
            sim: Some(sim),
            keystone,
            keystone_tool: tool,
        };
        env.wait_served(&http).await?;
        Ok(env)
    }

    /// Waits until the proxy answers and, through it, the simulators' version document.
    async fn wait_served(&mut self, http: &HttpClient) -> Result<()> {
        let probe = format!("{}/compute/", self.endpoint);
        let deadline = tokio::time::Instant::now() + start_timeout();
        loop {
            let last = match http.get(&probe).await {
                Ok((status, _)) if status.is_success() => return Ok(()),
                Ok((status, body)) => format!("{status}: {}", String::from_utf8_lossy(&body)),
                Err(err) => format!("{err:#}"),
            };
            if let Some(p) = self.sim_proc() {
                p.check_running()?;
            }
            if let Some(p) = self.proxy_proc() {
                p.check_running()?;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the OpenStack simulators did not answer through the proxy at {probe}: {last}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn sim_proc(&mut self) -> Option<&mut Proc> {
        match self.sim.as_mut()? {
            SimRunner::Process(p) => Some(p),
            SimRunner::InProcess(_) => None,
        }
    }

    fn proxy_proc(&mut self) -> Option<&mut Proc> {
        match self.proxy.as_mut()? {
            ProxyRunner::Process(p) => Some(p),
            ProxyRunner::InProcess(_) => None,
        }
    }

    /// The environment's directory (logs, Keystone's database, `cloud.conf`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `http://127.0.0.1:PORT/identity/v3`: Keystone through the proxy.
    pub fn auth_url(&self) -> &str {
        &self.credentials.auth_url
    }

    /// `http://127.0.0.1:PORT`: the proxy (control endpoints under `/__stratus/`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Keystone directly, bypassing the counters.
    pub fn keystone_url(&self) -> &str {
        &self.keystone_url
    }

    /// The region (`RegionOne`).
    pub fn region(&self) -> &str {
        &self.credentials.region
    }

    /// The CCM user's credentials (member of the `stratus-cluster` project).
    pub fn credentials(&self) -> &OpenStackCredentials {
        &self.credentials
    }

    /// The cloud admin's credentials (project `admin`, Default domain).
    pub fn admin_credentials(&self) -> &OpenStackCredentials {
        &self.admin
    }

    /// The `OS_*` variables of the CCM user.
    pub fn env_vars(&self) -> Vec<(String, String)> {
        self.credentials.env_vars()
    }

    /// A ready OCCM `cloud.conf` for the CCM user (written into the environment's directory).
    pub fn cloud_conf_path(&self) -> &Path {
        &self.cloud_conf
    }

    /// The text of [`OpenStackEnv::cloud_conf_path`].
    pub fn cloud_conf(&self) -> String {
        self.credentials.cloud_conf()
    }

    /// The test-control handle of the simulators (None in a detached environment).
    pub fn sim(&self) -> Option<&SimHandle> {
        match self.sim.as_ref()? {
            SimRunner::InProcess(server) => Some(server.handle()),
            SimRunner::Process(_) => None,
        }
    }

    /// The proxy's control endpoints (counters, faults, holds, timeline).
    pub fn proxy_control(&self) -> ProxyControl<'_> {
        ProxyControl {
            endpoint: &self.endpoint,
        }
    }

    /// Requests seen by the proxy, keyed by `service:METHOD path` (e.g. `compute:GET
    /// /servers/detail`, `identity:POST /v3/auth/tokens`).
    pub async fn request_counts(&self) -> Result<BTreeMap<String, u64>> {
        self.proxy_control().counts().await
    }

    /// Requests of one service (`compute`, `network`, `identity`…) seen so far.
    pub async fn service_request_total(&self, service: &str) -> Result<u64> {
        let prefix = format!("{service}:");
        Ok(self
            .request_counts()
            .await?
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v)
            .sum())
    }

    /// Zeroes the counters.
    pub async fn reset_request_counts(&self) -> Result<()> {
        self.proxy_control().reset().await
    }

    /// Injects faults from now on (e.g. `[{"service": "compute", "kind": "server_error",
    /// "status": 503}]`); an empty list stops injecting.
    pub async fn set_faults(&self, faults: &[proxy::Fault]) -> Result<()> {
        self.proxy_control().set_faults(faults).await
    }

    /// Keystone's resident memory (uWSGI master and workers), in bytes.
    pub fn keystone_rss_bytes(&self) -> Option<u64> {
        crate::core::process::process_tree_rss(self.keystone.pid()?)
    }

    /// The installed Keystone (venv, template, how long installing took in this process).
    pub fn keystone_tool(&self) -> &Keystone {
        &self.keystone_tool
    }

    /// `(name, pid)` of the child processes.
    pub(crate) fn pids(&self) -> Vec<(&'static str, u32)> {
        let mut procs = vec![&self.keystone];
        if let Some(SimRunner::Process(p)) = &self.sim {
            procs.push(p);
        }
        if let Some(ProxyRunner::Process(p)) = &self.proxy {
            procs.push(p);
        }
        procs
            .into_iter()
            .filter_map(|p| Some((p.name(), p.pid()?)))
            .collect()
    }

    /// Leaves the processes in place when `self` is dropped (`testenv up`).
    pub(crate) fn release(mut self) {
        self.released = true;
        self.keystone.release();
        if let Some(SimRunner::Process(p)) = &mut self.sim {
            p.release();
        }
        if let Some(ProxyRunner::Process(p)) = &mut self.proxy {
            p.release();
        }
    }
}

impl Drop for OpenStackEnv {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.proxy.take() {
            Some(ProxyRunner::InProcess(mut p)) => p.stop(),
            Some(ProxyRunner::Process(mut p)) => {
                crate::core::process::stop_all(&mut [&mut p], Duration::from_secs(5))
            }
            None => {}
        }
        match self.sim.take() {
            Some(SimRunner::InProcess(mut s)) => s.stop(),
            Some(SimRunner::Process(mut p)) => {
                crate::core::process::stop_all(&mut [&mut p], Duration::from_secs(5))
            }
            None => {}
        }
        crate::core::process::stop_all(&mut [&mut self.keystone], Duration::from_secs(10));
        remove_env_dir(&self.dir, self.remove_dir);
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}
