//! End to end: the cloud-controller-manager started from its unpacked image (chroot, uid
//! 65532, only the files the image carries plus its kubeconfig and cloud config) joins the test
//! environment (real kube-apiserver + moto) and initialises a node.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use common::{in_root, package, require_root, unpack, Registry};
use stratus_images::table;
use stratus_scenarios::ccm::{write_cloud_config, CcmProcess};
use stratus_scenarios::{ec2_fixture, kube_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

const ZONE: &str = "us-east-1a";
const CLUSTER_ID: &str = "image";

/// Copies `from` into the image root at `to` (absolute), readable by the non-root user.
fn copy_in(root: &Path, from: &Path, to: &str) {
    let target = root.join(to.trim_start_matches('/'));
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(from, &target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_from_its_image_initialises_a_node() {
    require_root();
    let binary = table::find("cloud-controller-manager").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let image = {
        let dir = dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            let crane = stratus_testenv::tools::crane::ensure_installed()?;
            let registry = Registry::start(&crane)?;
            let out = dir.join("images");
            let a = package(binary, &out)?;
            unpack(&registry, &a, &out, &dir.join("ccm"))
        })
        .await
        .unwrap()
        .expect("packaged and unpacked CCM image")
    };

    let env = TestEnv::start().await.expect("test environment");
    let admin = env
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await.expect("subnet");
    let instance = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, Some(CLUSTER_ID), "m5.large")
        .await
        .expect("launch")
        .remove(0);
    kube_fixture::create_uninitialized_node(&admin, &instance.id, &[], Default::default())
        .await
        .expect("node");

    // What a pod would mount: the kubeconfig and the cloud config.
    let root = &image.root;
    copy_in(
        root,
        &env.cluster().kubeconfig(Identity::CloudControllerManager),
        "/etc/kubernetes/kubeconfig",
    );
    copy_in(
        root,
        &write_cloud_config(env.dir(), CLUSTER_ID).unwrap(),
        "/etc/kubernetes/cloud.conf",
    );
    let mut cmd = in_root(root, &binary.entrypoint());
    cmd.args([
        "--cloud-provider=aws",
        "--cloud-config=/etc/kubernetes/cloud.conf",
        "--kubeconfig=/etc/kubernetes/kubeconfig",
        "--secure-port=0",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=500ms",
        "--v=4",
    ])
    .envs(env.aws().env_vars());
    let ccm = CcmProcess::spawn(cmd, env.cluster()).expect("start CCM from the image");

    let node = wait_for(
        &format!("node {} initialised", instance.id),
        Duration::from_secs(90),
        || async {
            Ok(kube_fixture::get_node(&admin, &instance.id)
                .await?
                .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\nCCM log:\n{}", ccm.log()));
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some(format!("aws:///{ZONE}/{}", instance.id).as_str()),
        "CCM log:\n{}",
        ccm.log()
    );
}
