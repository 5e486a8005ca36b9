//! The module-controller binary on a real apiserver, under its shipped RBAC: with no
//! `--cloud-provider` it takes its cloud from the provider cluster configuration's kind, answers
//! its probes, creates the module's StorageClasses and registration Secrets, and re-derives the
//! registration within seconds of a change to the configuration (a watch, not the 10-minute
//! resync); without a configuration or a flag it exits naming what it looked for.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, Patch, PatchParams};
use stratus_scenarios::csi::harness::{chart_account, Chart, ChartAccount};
use stratus_scenarios::wait_for;
use stratus_testenv::KubeCluster;

const CHART: Chart = Chart {
    name: "module-controller",
    release: "module-controller",
    service_account: "module-controller",
    sets: &[],
};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pcc(team: &str) -> String {
    format!(
        "apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nprovider:\n  region: eu-west-1\ntags:\n  team: {team}\n"
    )
}

async fn write_pcc(admin: &kube::Client, team: &str) -> Result<()> {
    let text = pcc(team);
    let secret = stratus_scenarios::kube_fixture::opaque_secret(
        "d8-provider-cluster-configuration",
        &[("cloud-provider-cluster-configuration.yaml", &text)],
    );
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .patch(
            "d8-provider-cluster-configuration",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

async fn registered_tags(admin: &kube::Client) -> Result<Option<serde_json::Value>> {
    let Some(s) = Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .get_opt("d8-node-manager-cloud-provider")
        .await?
    else {
        return Ok(None);
    };
    let aws = s
        .data
        .unwrap_or_default()
        .remove("aws")
        .context("no aws key")?;
    let doc: serde_json::Value = serde_json::from_slice(&aws.0)?;
    Ok(Some(doc["tags"].clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn picks_its_cloud_serves_probes_and_follows_changes() -> Result<()> {
    let cluster = KubeCluster::start().await?;
    let ChartAccount {
        admin, kubeconfig, ..
    } = chart_account(&cluster, &CHART, cluster.dir()).await?;
    let run = |probe: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_module-controller"));
        command
            .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
            .args([
                "--metrics-bind-address=0",
                &format!("--health-probe-bind-address={probe}"),
            ])
            .env("POD_NAMESPACE", "kube-system")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };

    // No flag and no configuration: a clear error, no serving.
    let out = run("0").output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "no --cloud-provider and secret kube-system/d8-provider-cluster-configuration"
        ),
        "{stderr}"
    );

    write_pcc(&admin, "platform").await?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let log = cluster.dir().join("module-controller.log");
    let _process = Killed(
        run(&format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?,
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let classes = Api::<StorageClass>::all(admin.clone());
    wait_for(
        "the AWS module's classes",
        Duration::from_secs(30),
        || async {
            let list = classes
                .list(&ListParams::default().labels("module=cloud-provider-aws"))
                .await?;
            Ok((list.items.len() == 4).then_some(()))
        },
    )
    .await
    .with_context(log_text)?;
    wait_for("/readyz 200", Duration::from_secs(10), || async {
        let answer = probe(port, "/readyz").await;
        Ok(answer
            .ok()
            .filter(|a| a.starts_with("HTTP/1.1 200"))
            .map(|_| ()))
    })
    .await?;
    assert_eq!(
        registered_tags(&admin).await?,
        Some(serde_json::json!({"team": "platform"}))
    );

    write_pcc(&admin, "storage").await?;
    wait_for(
        "the registration re-derived",
        Duration::from_secs(10),
        || async {
            Ok(
                (registered_tags(&admin).await? == Some(serde_json::json!({"team": "storage"})))
                    .then_some(()),
            )
        },
    )
    .await?;
    Ok(())
}

async fn probe(port: u16, path: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}
