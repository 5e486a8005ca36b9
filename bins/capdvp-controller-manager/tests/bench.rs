//! `make bench-capdvp`: a MachineDeployment scaled from 0 to CAPDVP_BENCH_MACHINES (100) under
//! the real Cluster API manager, the simulator starting every VM at once: seconds from the scale
//! to every DeckhouseMachine ready (its VM running), capdvp's parent API requests per machine
//! (its own `capdvp_parent_requests` counter, read from its HTTPS /metrics; watches excluded),
//! and capdvp's peak RSS. Then scaled back to 0 (seconds until the parent is empty). JSON to
//! stdout and `bench/results/bench-capdvp.json`. Ignored by default (run by the make target).

mod common;

use std::time::Duration;
use tokio::time::Instant;

use common::{Bed, Counts};
use stratus_scenarios::kube_fixture::repo_root;
use stratus_testenv::core::https::{get, Trust};
use stratus_testenv::Identity;

fn parent_requests(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("capdvp_parent_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: make bench-capdvp"]
async fn bench_capdvp() {
    let n: usize = std::env::var("CAPDVP_BENCH_MACHINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let bed = Bed::start(true).await.expect("test bed");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secure = format!("--secure-port={port}");
    let capdvp = bed.start_capdvp(&[&secure, "--bind-address=127.0.0.1", "--concurrency=16"]);
    bed.create_cluster(common::CLASS, 0).await.unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let token = bed.env.tenant.token(Identity::Admin).to_string();
    let metrics = || {
        let token = token.clone();
        async move {
            get(addr, "/metrics", Some(&token), &Trust::Any)
                .await
                .map(|a| a.body)
        }
    };
    common::wait(
        "capdvp serving metrics",
        Duration::from_secs(60),
        || async {
            Ok(metrics()
                .await
                .ok()
                .filter(|b| b.contains("capdvp_"))
                .map(|_| ()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", capdvp.log()));
    let before = parent_requests(&metrics().await.unwrap());

    let started = Instant::now();
    bed.scale("workers", n as i32).await.unwrap();
    common::wait("every machine ready", Duration::from_secs(600), || async {
        let ready = bed
            .deckhouse_machines()
            .await?
            .iter()
            .filter(|d| d.status.as_ref().is_some_and(|s| s.ready))
            .count();
        Ok((ready == n).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", capdvp.log()));
    let up = started.elapsed().as_secs_f64();
    let requests = parent_requests(&metrics().await.unwrap()) - before;
    let counts = bed.parent_counts().await.unwrap();
    assert_eq!((counts.vms, counts.disks, counts.secrets), (n, 2 * n, n));

    let started = Instant::now();
    bed.scale("workers", 0).await.unwrap();
    common::wait("an empty parent", Duration::from_secs(600), || async {
        Ok((bed.parent_counts().await? == Counts::default()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", capdvp.log()));
    let down = started.elapsed().as_secs_f64();
    let rss_mib = capdvp.peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
    let binary = common::capdvp_binary();
    let build = if binary.components().any(|c| c.as_os_str() == "release") {
        "release"
    } else {
        "debug"
    };
    let json = serde_json::json!({
        "benchmark": "capdvp",
        "build": build,
        "binary": binary.display().to_string(),
        "machines": n,
        "seconds_to_all_ready": (up * 100.0).round() / 100.0,
        "parent_requests_per_machine_create": ((requests / n as f64) * 100.0).round() / 100.0,
        "seconds_to_empty_after_scale_to_zero": (down * 100.0).round() / 100.0,
        "capdvp_peak_rss_mib": (rss_mib * 10.0).round() / 10.0,
        "rss_target_mib": 30,
        "cluster_api": "sigs.k8s.io/cluster-api v1.14.2 (real manager)",
    });
    let text = serde_json::to_string_pretty(&json).unwrap();
    println!("{text}");
    let dir = repo_root().join("bench/results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("bench-capdvp.json"), format!("{text}\n")).unwrap();
}
