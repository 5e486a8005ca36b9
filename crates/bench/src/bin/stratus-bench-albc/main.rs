//! aws-load-balancer-controller benchmark (JSON on stdout), each part on its own real
//! kube-apiserver with moto behind the counting proxy:
//! - `ingress`: Ingresses in Ingress groups over pod endpoints (IP targets) — seconds until
//!   every Ingress has a hostname, ELBv2 requests per Ingress, then endpoint churn;
//! - `tgb`: TargetGroupBindings to pre-made target groups — registration, then churn.
//!
//! Both report ELBv2 requests per target group per second of churn and the controller's peak
//! RSS.

mod common;
mod ingress;
mod tgb;

use clap::{Parser, ValueEnum};

/// Which parts run.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Ingress,
    Tgb,
    Both,
}

/// Flags.
#[derive(Parser)]
pub struct Args {
    /// Parts to run.
    #[arg(long, value_enum, default_value = "both")]
    scenario: Scenario,
    /// Ingresses (one backend Service and target group each).
    #[arg(long, default_value_t = 50)]
    ingresses: usize,
    /// Ingress groups the Ingresses are spread over.
    #[arg(long, default_value_t = 10)]
    groups: usize,
    /// TargetGroupBindings (one target group and Service each).
    #[arg(long, default_value_t = 10)]
    bindings: usize,
    /// Pod endpoints over all backends (of each part).
    #[arg(long, default_value_t = 200)]
    endpoints: usize,
    /// Endpoint changes during each churn phase.
    #[arg(long, default_value_t = 500)]
    changes: usize,
    /// Seconds the churn is spread over.
    #[arg(long, default_value_t = 10)]
    churn_seconds: u64,
    /// An extra controller flag (repeatable), e.g.
    /// `--controller-flag=--targetgroupbinding-max-concurrent-reconciles=10`.
    #[arg(long = "controller-flag", allow_hyphen_values = true)]
    controller_flags: Vec<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut report = serde_json::json!({
        "benchmark": "albc",
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "controller_flags": args.controller_flags,
    });
    if matches!(args.scenario, Scenario::Ingress | Scenario::Both) {
        report["ingress"] = ingress::run(&args).await?;
    }
    if matches!(args.scenario, Scenario::Tgb | Scenario::Both) {
        report["targetgroupbinding"] = tgb::run(&args).await?;
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
