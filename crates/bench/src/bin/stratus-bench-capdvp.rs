//! `make bench-capdvp`: a MachineDeployment scaled from 0 to `--machines` (100) under
//! the real Cluster API manager, the simulator starting every VM at once: seconds from the scale
//! to every DeckhouseMachine ready (its VM running), capdvp's parent API requests per machine
//! (its own `capdvp_parent_requests` counter, read from its HTTPS /metrics; watches excluded),
//! and capdvp's peak RSS. Then scaled back to 0 (seconds until the parent is empty). JSON to
//! stdout (`make bench-capdvp` writes it to `bench/results/bench-capdvp.json`). The measured
//! capdvp is `--binary` (by default the one beside this executable).

use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

use clap::Parser;
use stratus_scenarios::capdvp_bed::{Bed, Counts, CLASS};
use stratus_scenarios::ccm::sibling_binary;
use stratus_scenarios::wait_for;
use stratus_testenv::core::https::{get, Trust};
use stratus_testenv::Identity;

#[derive(Parser)]
#[command(
    about = "capdvp under the real Cluster API manager: a MachineDeployment scaled 0 -> N -> 0"
)]
struct Args {
    /// Machines of the MachineDeployment.
    #[arg(long, default_value_t = 100)]
    machines: usize,
    /// The capdvp-controller-manager binary measured (default: beside this executable).
    #[arg(long)]
    binary: Option<PathBuf>,
}

fn parent_requests(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("capdvp_parent_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let n = args.machines;
    let binary = match args.binary {
        Some(binary) => binary,
        None => sibling_binary("capdvp-controller-manager").expect("locating capdvp"),
    };
    let bed = Bed::start(true, binary.clone()).await.expect("test bed");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secure = format!("--secure-port={port}");
    let capdvp = bed.start_capdvp(&[&secure, "--bind-address=127.0.0.1", "--concurrency=16"]);
    bed.create_cluster(CLASS, 0).await.unwrap();
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
    wait_for(
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
    wait_for("every machine ready", Duration::from_secs(600), || async {
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
    wait_for("an empty parent", Duration::from_secs(600), || async {
        Ok((bed.parent_counts().await? == Counts::default()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", capdvp.log()));
    let down = started.elapsed().as_secs_f64();
    let rss_mib = capdvp.peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
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
}
