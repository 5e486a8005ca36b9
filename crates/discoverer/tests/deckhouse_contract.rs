//! The cloud-data-discoverer binary started exactly as Deckhouse's module templates start it:
//! args `--discovery-period=1h --listen-address=…:8081` and nothing else (no provider flag: the
//! cloud is chosen from the environment the template gives), each cloud's variables, the
//! shipped RBAC. It must stay up, answer its probe path and do its job (AWS: the instance-type
//! catalog; OpenStack and DVP: the discovery Secret, OpenStack's from `MODULE_CONFIG` when the
//! cluster holds no discovery data). Test stand-ins: the listen port is a free loopback port
//! (Deckhouse uses 8081 in the pod), `KUBECONFIG` stands for the pod's ServiceAccount, and
//! `AWS_ENDPOINT_URL` points the SDK at moto. OpenStack gets exactly the variables Deckhouse
//! fills from its `cloud-data-discoverer` Secret (`OS_AUTH_URL`, `OS_DOMAIN_NAME`,
//! `OS_TENANT_NAME`, `OS_USERNAME`, `OS_PASSWORD`, `OS_REGION`, `MODULE_CONFIG`) and the
//! literal `CLUSTER_UUID`, against a real Keystone.

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use common::{catalog_api, install, parent_identity, wait_for, ME};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use stratus_testenv::dvp::DvpEnv;
use stratus_testenv::{OpenStackEnv, TestEnv};

/// The discoverer binary built beside the test binaries.
fn binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("exe dir")?;
    [
        dir.join("cloud-data-discoverer"),
        dir.join("../cloud-data-discoverer"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .context("cloud-data-discoverer is not built (cargo build -p cloud-data-discoverer)")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// The process, killed on drop; its log in `log`.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with Deckhouse's two args and `env` only (plus PATH).
fn start(port: u16, env: &[(String, String)], log: PathBuf) -> Result<Running> {
    let out = std::fs::File::create(&log)?;
    let child = Command::new(binary()?)
        .args([
            "--discovery-period=1h".to_string(),
            format!("--listen-address=127.0.0.1:{port}"),
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()?;
    Ok(Running { child, log })
}

/// GET `http://127.0.0.1:{port}{path}`: the status.
async fn status(port: u16, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Probes answer 200 and the process is still up.
async fn assert_up_and_healthy(p: &mut Running, port: u16) -> Result<()> {
    wait_for("/healthz 200", Duration::from_secs(60), || async {
        Ok((status(port, "/healthz").await == Some(200)).then_some(()))
    })
    .await
    .with_context(|| p.log())?;
    assert!(p.child.try_wait()?.is_none(), "exited:\n{}", p.log());
    Ok(())
}

#[tokio::test]
async fn aws_under_deckhouses_container_spec() -> Result<()> {
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let port = free_port();
    let vars: Vec<(String, String)> = [
        ("AWS_ACCESS_KEY_ID", "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL", env.aws_endpoint().to_string()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        (
            "KUBECONFIG",
            env.cluster().kubeconfig(ME).display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut p = start(port, &vars, env.cluster().dir().join("discoverer-aws.log"))?;
    assert_up_and_healthy(&mut p, port).await?;
    let catalog = catalog_api(env.kube_client(ME).await?);
    wait_for(
        "the instance-type catalog",
        Duration::from_secs(60),
        || async { Ok(catalog.get_opt("for-cluster-autoscaler").await?) },
    )
    .await
    .with_context(|| p.log())?;
    assert!(p.log().contains("aws"), "{}", p.log());
    assert!(p.child.try_wait()?.is_none(), "exited:\n{}", p.log());
    Ok(())
}

#[tokio::test]
async fn dvp_under_deckhouses_container_spec() -> Result<()> {
    let env = DvpEnv::start().await?;
    install(&env.tenant).await?;
    let mut vars = parent_identity(&env).await?;
    vars.push((
        "KUBECONFIG".into(),
        env.tenant.kubeconfig(ME).display().to_string(),
    ));
    let port = free_port();
    let mut p = start(port, &vars, env.tenant.dir().join("discoverer-dvp.log"))?;
    assert_up_and_healthy(&mut p, port).await?;
    let secrets: Api<Secret> = Api::namespaced(env.tenant.kube_client(ME).await?, "kube-system");
    wait_for("the discovery Secret", Duration::from_secs(60), || async {
        Ok(secrets.get_opt("d8-cloud-provider-discovery-data").await?)
    })
    .await
    .with_context(|| p.log())?;
    assert!(p.child.try_wait()?.is_none(), "exited:\n{}", p.log());
    Ok(())
}

#[tokio::test]
async fn openstack_under_deckhouses_container_spec() -> Result<()> {
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let cloud = OpenStackEnv::start().await?;
    let given: std::collections::BTreeMap<String, String> = cloud.env_vars().into_iter().collect();
    let from = |k: &str| given.get(k).cloned().unwrap_or_default();
    let module_config = serde_json::json!({
        "instances": {"imageName": "ubuntu-22-04", "mainNetwork": "stratus-internal",
                      "sshKeyPairName": "deckhouse"},
        "zones": ["nova"]});
    let vars: Vec<(String, String)> = [
        ("OS_AUTH_URL", from("OS_AUTH_URL")),
        ("OS_DOMAIN_NAME", from("OS_USER_DOMAIN_NAME")),
        ("OS_TENANT_NAME", from("OS_PROJECT_NAME")),
        ("OS_USERNAME", from("OS_USERNAME")),
        ("OS_PASSWORD", from("OS_PASSWORD")),
        ("OS_REGION", from("OS_REGION_NAME")),
        ("MODULE_CONFIG", module_config.to_string()),
        (
            "CLUSTER_UUID",
            "3f1e6c1a-0000-4000-8000-00000000000c".to_string(),
        ),
        (
            "KUBECONFIG",
            env.cluster().kubeconfig(ME).display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let port = free_port();
    let mut p = start(
        port,
        &vars,
        env.cluster().dir().join("discoverer-openstack.log"),
    )?;
    assert_up_and_healthy(&mut p, port).await?;
    let secrets: Api<Secret> = Api::namespaced(env.kube_client(ME).await?, "kube-system");
    let secret = wait_for("the discovery Secret", Duration::from_secs(60), || async {
        Ok(secrets.get_opt("d8-cloud-provider-discovery-data").await?)
    })
    .await
    .with_context(|| p.log())?;
    let document: serde_json::Value = serde_json::from_slice(
        &secret
            .data
            .unwrap_or_default()
            .get("discovery-data.json")
            .context("no discovery-data.json")?
            .0,
    )?;
    // MODULE_CONFIG stood in for the discovery data the cluster does not hold.
    assert_eq!(
        document["instances"]["imageName"], "ubuntu-22-04",
        "{document}"
    );
    let catalog = catalog_api(env.kube_client(ME).await?);
    wait_for(
        "the instance-type catalog",
        Duration::from_secs(60),
        || async { Ok(catalog.get_opt("for-cluster-autoscaler").await?) },
    )
    .await
    .with_context(|| p.log())?;
    assert!(p.child.try_wait()?.is_none(), "exited:\n{}", p.log());
    Ok(())
}
