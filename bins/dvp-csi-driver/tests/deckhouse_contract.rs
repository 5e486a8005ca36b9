//! The DVP CSI driver started exactly as Deckhouse's cloud-provider-dvp module starts it.
//! Controller: args `--node-name=$(NODE_ID) --endpoint=unix:///csi/csi.sock`, env `NODE_ID`,
//! `DVP_KUBERNETES_CONFIG_BASE64` and `DVP_NAMESPACE` only (no `CLUSTER_UUID`): it answers the
//! Identity service and creates a VirtualDisk in the parent labelled with the cluster's UUID,
//! found where Deckhouse keeps it (ConfigMap `kube-system/d8-cluster-uuid`, read as the chart's
//! ServiceAccount under the chart's RBAC). Node: the same plus
//! `--cluster-uuid=unix:///csi/csi.sock` (sic): it answers and reports its node. Test stand-ins:
//! the socket lives in the test's directory, and `KUBECONFIG` stands for the pod's
//! ServiceAccount.

mod common;

use std::path::Path;

use anyhow::{ensure, Context, Result};
use common::{driver_env, node_vm, CHART, NODE, PARENT_CLASS, VM};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use stratus_csi_dvp::{DRIVER_NAME, STORAGE_CLASS_PARAM};
use stratus_dvp_api::labels::CLUSTER_UUID as CLUSTER_UUID_LABEL;
use stratus_dvp_api::VirtualDisk;
use stratus_scenarios::csi::contract::{create_volume, delete_volume, identity_answers, node_info};
use stratus_scenarios::csi::driver;
use stratus_scenarios::csi::harness::chart_account;
use stratus_testenv::DvpEnv;

/// The UUID Deckhouse keeps for the tenant cluster.
const UUID: &str = "8d3c2b1a-4e5f-4a6b-9c7d-0e1f2a3b4c5d";

async fn start(
    dir: &Path,
    args: &[String],
    vars: &[(String, String)],
) -> Result<(tokio::process::Child, std::path::PathBuf)> {
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_dvp-csi-driver")),
        dir,
        args,
        vars,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_and_node_under_deckhouses_container_spec() -> Result<()> {
    let env = DvpEnv::start().await?;
    let tmp = tempfile::tempdir()?;
    let admin = env
        .tenant
        .kube_client(stratus_testenv::Identity::Admin)
        .await?;
    Api::<ConfigMap>::namespaced(admin, "kube-system")
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("d8-cluster-uuid".into()),
                    ..Default::default()
                },
                data: Some([("cluster-uuid".to_string(), UUID.to_string())].into()),
                ..Default::default()
            },
        )
        .await?;
    let account = chart_account(&env.tenant, &CHART, tmp.path()).await?;
    node_vm(&env, VM, NODE).await?;
    let mut vars = driver_env(&env).await?;
    vars.push(("NODE_ID".into(), NODE.into()));
    vars.push((
        "KUBECONFIG".into(),
        account.kubeconfig.display().to_string(),
    ));

    // Controller.
    let dir = tmp.path().join("controller");
    std::fs::create_dir_all(&dir)?;
    let endpoint = format!("--endpoint=unix://{}", driver::socket(&dir).display());
    let (_controller, socket) =
        start(&dir, &[format!("--node-name={NODE}"), endpoint], &vars).await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (id, _) = create_volume(
        &socket,
        "pvc-deckhouse",
        &[(STORAGE_CLASS_PARAM, PARENT_CLASS)],
        None,
    )
    .await
    .with_context(log)?;
    let disks: Api<VirtualDisk> = Api::namespaced(env.parent_admin().await?, env.namespace());
    let labelled = disks
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|d| {
            d.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_UUID_LABEL))
                .map(String::as_str)
                == Some(UUID)
        });
    ensure!(
        labelled.is_some(),
        "no VirtualDisk labelled {CLUSTER_UUID_LABEL}={UUID} for {id}; {}",
        log()
    );
    delete_volume(&socket, &id).await.with_context(log)?;

    // Node.
    let dir = tmp.path().join("node");
    std::fs::create_dir_all(&dir)?;
    let endpoint = format!("--endpoint=unix://{}", driver::socket(&dir).display());
    let (_node, socket) = start(
        &dir,
        &[
            format!("--node-name={NODE}"),
            endpoint,
            "--cluster-uuid=unix:///csi/csi.sock".into(),
        ],
        &vars,
    )
    .await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (node_id, _) = node_info(&socket).await.with_context(log)?;
    ensure!(node_id == NODE, "NodeGetInfo named {node_id:?}");
    Ok(())
}
