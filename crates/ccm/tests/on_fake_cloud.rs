//! The CCM library run in-process with the fake provider on a real apiserver: a provider
//! without routes gets the route controller skipped with its reason in the log, the other
//! controllers run, and `/metrics` shows controller reconcile and leader-election series.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use stratus_ccm::options::Options;
use stratus_cloud::Providers;
use stratus_cloud_fake::{running, FakeCloud, FakeProvider};
use stratus_scenarios::https::{get, Trust};
use stratus_scenarios::{kube_fixture, wait_for};
use stratus_testenv::{Identity, KubeCluster};

const WAIT: Duration = Duration::from_secs(30);

/// Log lines written by the process, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_routes_skips_the_route_controller_and_metrics_show_controllers() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("stratus=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let cluster = KubeCluster::start().await.expect("cluster");
    let admin = cluster.kube_client(Identity::Admin).await.unwrap();
    let cloud = FakeCloud::new();
    cloud.unsupported("routes", "this fake has no router");
    cloud.add_instance(running("f-1", "node-a", "10.0.0.1"));
    let provider = FakeProvider {
        cloud: cloud.clone(),
    };
    let port = free_port();
    let kubeconfig = cluster.kubeconfig(Identity::Admin);
    let opts = Options::try_parse_from([
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--cluster-cidr=10.244.0.0/16".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--leader-elect-lease-duration=2s".into(),
        "--leader-elect-renew-deadline=1500ms".into(),
        "--leader-elect-retry-period=500ms".into(),
    ])
    .unwrap();
    let network = opts.pod_network().unwrap();
    let ccm = tokio::spawn(async move {
        let list: [&dyn stratus_cloud::Provider; 1] = [&provider];
        stratus_ccm::supervisor::run(Providers(&list), opts, network).await
    });

    kube_fixture::create_uninitialized_node(&admin, "node-a", &[], Default::default())
        .await
        .unwrap();
    wait_for("node-a initialised by the fake cloud", WAIT, || async {
        Ok(kube_fixture::get_node(&admin, "node-a")
            .await?
            .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
    })
    .await
    .unwrap();
    let text = logs.text();
    assert!(
        text.contains("the route controller is not started: this fake has no router"),
        "{text}"
    );
    assert!(
        !text.contains("controller started controller=\"route\""),
        "{text}"
    );
    assert_eq!(
        cloud.count("route_tables"),
        0,
        "the route controller never ran"
    );

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let token = cluster.token(Identity::Admin).to_string();
    let metrics = wait_for("metrics with the controller series", WAIT, || async {
        let answer = get(addr, "/metrics", Some(&token), &Trust::Any).await?;
        Ok((answer.status == 200
            && answer
                .body
                .contains("stratus_controller_reconciles_total{controller=\"cloud-node\"}"))
        .then_some(answer.body))
    })
    .await
    .unwrap();
    for series in [
        "leader_election_master_status{name=\"cloud-controller-manager\"} 1",
        "stratus_controller_reconcile_duration_seconds_count{controller=\"cloud-node\"}",
        "stratus_controller_reconciles_total{controller=\"cloud-node-lifecycle\"}",
    ] {
        assert!(
            metrics.contains(series),
            "{series} missing from:\n{metrics}"
        );
    }
    ccm.abort();
}
