//! Shared set-up of the OpenStack integration tests: one real Keystone with the simulators per
//! test binary (started once, on a thread that lives as long as the process), a fresh real
//! cluster per test with the shipped RBAC, and the CCM binary with `--cloud-provider=openstack`.
// Unsafe code in this file: registering the shared cloud's directory clean-up with atexit(3).
#![allow(unsafe_code, dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};

/// How long one step may take.
pub const WAIT: Duration = Duration::from_secs(60);
/// The shutdown taint.
pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

static SHARED: OnceLock<&'static OpenStackEnv> = OnceLock::new();
static SHARED_DIR: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_shared_dir() {
    if let Some(dir) = SHARED_DIR.get() {
        if std::env::var_os("STRATUS_KEEP_ENV").is_none() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The OpenStack cloud every test of this binary that needs no faults and no special Keystone
/// settings shares. Keystone is started from a thread that never ends: its processes are bound
/// to the thread that started them (`PR_SET_PDEATHSIG`), and die with the test process.
pub fn shared_cloud() -> &'static OpenStackEnv {
    SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("shared-openstack".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime of the shared OpenStack cloud");
                let env = runtime.block_on(OpenStackEnv::start());
                let env = env.map(|e| &*Box::leak(Box::new(e)));
                if let Ok(env) = &env {
                    let _ = SHARED_DIR.set(env.dir().to_path_buf());
                    // SAFETY: atexit(3) with a function that takes nothing and does not unwind.
                    unsafe {
                        libc::atexit(remove_shared_dir);
                    }
                }
                let _ = tx.send(env);
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn the shared OpenStack thread");
        rx.recv()
            .expect("the shared OpenStack thread answers")
            .unwrap_or_else(|e| panic!("shared OpenStack environment: {e:#}"))
    })
}

/// [`shared_cloud`] from async code.
pub async fn shared() -> &'static OpenStackEnv {
    tokio::task::spawn_blocking(shared_cloud)
        .await
        .expect("shared cloud start")
}

/// One test's cluster (real etcd + kube-apiserver, the shipped RBAC) and its cloud.
pub struct Setup<'a> {
    pub cloud: &'a OpenStackEnv,
    pub cluster: KubeCluster,
    pub admin: kube::Client,
    /// Server names of this test start with it (the shared cloud serves several tests).
    pub prefix: String,
}

/// A fresh cluster for `prefix` against `cloud`, with `deploy/rbac.yaml` applied.
pub async fn setup<'a>(cloud: &'a OpenStackEnv, prefix: &str) -> Setup<'a> {
    let cluster = KubeCluster::start().await.expect("cluster");
    let admin = cluster
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    Setup {
        cloud,
        cluster,
        admin,
        prefix: prefix.to_owned(),
    }
}

impl Setup<'_> {
    /// The simulators' handle.
    pub fn sim(&self) -> &SimHandle {
        self.cloud.sim().expect("in-process simulators")
    }

    /// This test's name for a server.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.prefix)
    }

    /// Makes ACTIVE `m1.small` servers named `<prefix>-<suffix>`; their ids in order.
    pub fn servers(&self, suffixes: &[&str]) -> Vec<String> {
        let specs: Vec<ServerSpec> = suffixes
            .iter()
            .map(|s| ServerSpec::active(self.name(s)))
            .collect();
        self.sim().create_servers(&specs).expect("servers")
    }

    /// The CCM on this cluster, against the cloud's `cloud.conf` (and `extra_conf` appended),
    /// with periods of about a second.
    pub fn start_ccm(&self, extra_conf: &str, extra: &[&str]) -> CcmProcess {
        let mut args = vec![
            "--node-monitor-period=500ms",
            "--instance-cache-refresh-period=1s",
            "--leader-elect-lease-duration=2s",
            "--leader-elect-renew-deadline=1500ms",
            "--leader-elect-retry-period=500ms",
        ];
        args.extend(extra);
        self.start_ccm_at_defaults(extra_conf, &args)
    }

    /// The CCM on this cluster, against the cloud's `cloud.conf` (and `extra_conf` appended),
    /// with the default periods.
    pub fn start_ccm_at_defaults(&self, extra_conf: &str, extra: &[&str]) -> CcmProcess {
        self.start_ccm_with_env(extra_conf, extra, &[])
    }

    /// As [`Setup::start_ccm_at_defaults`], with `vars` in the CCM's environment.
    pub fn start_ccm_with_env(
        &self,
        extra_conf: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> CcmProcess {
        let conf = self.cluster.dir().join("cloud.conf");
        std::fs::write(&conf, format!("{}{extra_conf}", self.cloud.cloud_conf()))
            .expect("write cloud.conf");
        let mut args: Vec<String> = vec![
            "--cloud-provider=openstack".into(),
            format!("--cloud-config={}", conf.display()),
            "--v=4".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let vars = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CcmProcess::start_on(&ccm_binary(), &self.cluster, vars, &args).expect("start ccm")
    }

    /// An uninitialised Node, optionally with a providerID and kubelet-reported IPs.
    pub async fn node(&self, name: &str, provider_id: Option<&str>, ips: &[&str]) {
        kube_fixture::create_uninitialized_node(&self.admin, name, ips, BTreeMap::new())
            .await
            .unwrap_or_else(|e| panic!("node {name}: {e:#}"));
        if let Some(pid) = provider_id {
            let patch = serde_json::json!({ "spec": { "providerID": pid } });
            Api::<Node>::all(self.admin.clone())
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("providerID of {name}: {e}"));
        }
    }

    /// Waits until the CCM removed the uninitialised taint of `name`.
    pub async fn initialized(&self, name: &str, ccm: &CcmProcess) -> Node {
        self.until(name, "initialised", ccm, |n| {
            n.is_some_and(|n| !has_taint(n, UNINITIALIZED))
        })
        .await
        .expect("node")
    }

    /// Waits until Node `name` (None: deleted) passes `ok`; on timeout panics with the CCM log.
    pub async fn until(
        &self,
        name: &str,
        what: &str,
        ccm: &CcmProcess,
        ok: impl Fn(Option<&Node>) -> bool,
    ) -> Option<Node> {
        wait_for(&format!("node {name} {what}"), WAIT, || async {
            let node = get_node(&self.admin, name).await?;
            Ok(ok(node.as_ref()).then_some(node))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()))
    }
}

pub fn ccm_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cloud-controller-manager"))
}

/// Log lines of failed reconciles and failed cloud listings.
pub fn failure_lines(log: &str) -> Vec<&str> {
    const FAILURES: &[&str] = &[
        "node sync failed",
        "node lifecycle action failed",
        "node lifecycle pass could not check every node",
        "listing the project's servers failed",
    ];
    log.lines()
        .filter(|l| FAILURES.iter().any(|f| l.contains(f)))
        .collect()
}
