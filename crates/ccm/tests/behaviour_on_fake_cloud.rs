//! The provider-neutral behavioural scenarios (`stratus_scenarios::behaviour`) on the fake
//! cloud: the CCM library in-process with the fake provider on a real apiserver. The same
//! scenarios run on AWS in `bins/cloud-controller-manager/tests/behaviour.rs`. (A file of its
//! own: `on_fake_cloud.rs` captures the process's logs.)

use clap::Parser;
use stratus_ccm::options::Options;
use stratus_cloud::Providers;
use stratus_cloud_fake::{FakeCloud, FakeProvider};
use stratus_scenarios::behaviour;
use stratus_scenarios::cloud_fixture::FakeFixture;
use stratus_testenv::{Identity, KubeCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_cloud_passes_the_behavioural_scenarios() {
    let cluster = KubeCluster::start().await.expect("cluster");
    let admin = cluster.kube_client(Identity::Admin).await.unwrap();
    let cloud = FakeCloud::new();
    let provider = FakeProvider {
        cloud: cloud.clone(),
    };
    let kubeconfig = cluster.kubeconfig(Identity::Admin);
    let opts = Options::try_parse_from([
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--cluster-cidr=10.244.0.0/16".into(),
        "--secure-port=0".into(),
        "--leader-elect=false".into(),
        "--node-monitor-period=500ms".into(),
    ])
    .unwrap();
    let network = opts.pod_network().unwrap();
    let ccm = tokio::spawn(async move {
        let list: [&dyn stratus_cloud::Provider; 1] = [&provider];
        stratus_ccm::supervisor::run(Providers(&list), opts, network).await
    });
    let fixture = FakeFixture::new(cloud);
    behaviour::nodes_join_stop_and_leave(&fixture, &admin)
        .await
        .unwrap();
    behaviour::load_balancer_follows_its_service(&fixture, &admin, "default")
        .await
        .unwrap();
    behaviour::pod_cidr_is_routed_to_its_machine(&fixture, &admin, "10.244.7.0/24")
        .await
        .unwrap();
    ccm.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_cloud_lifecycle_is_prompt_and_cheap_at_the_default_flags() {
    let cluster = KubeCluster::start().await.expect("cluster");
    let admin = cluster.kube_client(Identity::Admin).await.unwrap();
    let cloud = FakeCloud::new();
    let provider = FakeProvider {
        cloud: cloud.clone(),
    };
    let kubeconfig = cluster.kubeconfig(Identity::Admin);
    let opts = Options::try_parse_from([
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--secure-port=0".into(),
        "--leader-elect=false".into(),
    ])
    .unwrap();
    let network = opts.pod_network().unwrap();
    let ccm = tokio::spawn(async move {
        let list: [&dyn stratus_cloud::Provider; 1] = [&provider];
        stratus_ccm::supervisor::run(Providers(&list), opts, network).await
    });
    let fixture = FakeFixture::new(cloud);
    let cost = behaviour::lifecycle_is_prompt_and_cheap(&fixture, &admin)
        .await
        .unwrap();
    eprintln!("fake cloud lifecycle at the default flags: {cost:?}");
    ccm.abort();
}
