//! The Cinder CSI plugin started exactly as Deckhouse's cloud-provider-openstack module starts
//! it, against a real Keystone and the Cinder/Nova simulators. Controller:
//! `--nodeid=$(NODE_ID) --cloud-config=/etc/config/cloud-config --cluster=<clusterUUID>
//! --endpoint=unix:///csi/csi.sock`, env `NODE_ID` (the Kubernetes node name), the cloud-config
//! Deckhouse's Secret holds: it answers the Identity service and creates a volume carrying the
//! cluster's metadata. Node: the same without `--cluster`: NodeGetInfo answers the node's Nova
//! server UUID and zone from the metadata service, not the node name `--nodeid` carries (as
//! upstream: a node name as the ID would fail every attach). Test stand-ins: the socket lives in
//! the test's directory, and the metadata service is a loopback server answering the published
//! `meta_data.json` document (`CINDER_CSI_METADATA_URL`).

mod common;

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use common::{node_server, sim, ZONE};
use stratus_csi_cinder::DRIVER_NAME;
use stratus_scenarios::csi::contract::{create_volume, delete_volume, identity_answers, node_info};
use stratus_scenarios::csi::driver;
use stratus_testenv::OpenStackEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The Kubernetes node name Deckhouse passes as `--nodeid`.
const NODE_NAME: &str = "worker-0";
/// The cluster UUID Deckhouse passes as `--cluster`.
const CLUSTER: &str = "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b";

/// Serves `document` as `/openstack/latest/meta_data.json` on a loopback port; its URL.
async fn metadata_service(document: String) -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!(
        "http://{}/openstack/latest/meta_data.json",
        listener.local_addr()?
    );
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = document.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(url)
}

/// The cloud-config as Deckhouse's Secret holds it (values quoted, the fixed sections).
fn deckhouse_cloud_config(env: &OpenStackEnv, dir: &Path) -> Result<PathBuf> {
    let global: String = env
        .cloud_conf()
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| format!("{k} = \"{v}\"\n"))
        .collect();
    let path = dir.join("cloud-config");
    std::fs::write(
        &path,
        format!(
            "[Global]\n{global}[Networking]\ninternal-network-name = \"stratus-internal\"\n\
             ipv6-support-disabled = true\n[LoadBalancer]\ncreate-monitor = \"true\"\n\
             monitor-delay = \"2s\"\nmonitor-timeout = \"1s\"\n[BlockStorage]\n\
             rescan-on-resize = true\n"
        ),
    )?;
    Ok(path)
}

async fn start(
    dir: &Path,
    args: &[String],
    metadata_url: &str,
) -> Result<(tokio::process::Child, PathBuf)> {
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_cinder-csi-plugin")),
        dir,
        args,
        &[
            ("NODE_ID".to_string(), NODE_NAME.to_string()),
            (
                "CINDER_CSI_METADATA_URL".to_string(),
                metadata_url.to_string(),
            ),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_and_node_under_deckhouses_container_spec() -> Result<()> {
    let env = OpenStackEnv::start().await?;
    let server = node_server(&env, NODE_NAME)?;
    let metadata_url = metadata_service(
        serde_json::json!({"uuid": server, "availability_zone": ZONE, "name": NODE_NAME,
                           "hostname": NODE_NAME, "meta": {}})
        .to_string(),
    )
    .await?;
    let tmp = tempfile::tempdir()?;
    let conf = deckhouse_cloud_config(&env, tmp.path())?;

    // Controller (the template leaves the node service on, as upstream's default).
    let dir = tmp.path().join("controller");
    std::fs::create_dir_all(&dir)?;
    let args = vec![
        format!("--nodeid={NODE_NAME}"),
        format!("--cloud-config={}", conf.display()),
        format!("--cluster={CLUSTER}"),
        format!("--endpoint=unix://{}", driver::socket(&dir).display()),
    ];
    let (_controller, socket) = start(&dir, &args, &metadata_url).await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (id, _) = create_volume(&socket, "pvc-deckhouse", &[], None)
        .await
        .with_context(log)?;
    let volume = sim(&env)?
        .volumes()
        .into_iter()
        .find(|v| v["id"] == id.as_str())
        .context("the created volume is not in Cinder")?;
    ensure!(
        volume["metadata"]["cinder.csi.openstack.org/cluster"] == CLUSTER,
        "{volume}"
    );
    delete_volume(&socket, &id).await.with_context(log)?;

    // Node.
    let dir = tmp.path().join("node");
    std::fs::create_dir_all(&dir)?;
    let args = vec![
        format!("--nodeid={NODE_NAME}"),
        format!("--cloud-config={}", conf.display()),
        format!("--endpoint=unix://{}", driver::socket(&dir).display()),
    ];
    let (_node, socket) = start(&dir, &args, &metadata_url).await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (node_id, segments) = node_info(&socket).await.with_context(log)?;
    ensure!(
        node_id == server,
        "NodeGetInfo answered {node_id:?}, not the server UUID {server}"
    );
    ensure!(
        segments.values().any(|z| z == ZONE),
        "NodeGetInfo topology {segments:?} lacks zone {ZONE}"
    );
    Ok(())
}
