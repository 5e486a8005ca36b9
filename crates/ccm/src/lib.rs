//! The cloud-controller-manager as a library: flags, the controller start plan, leader-election
//! groups (with leader migration), per-controller credentials, readiness and the supervisor.
//! It names no provider: the binary passes the providers it was built with.
//!
//! Watches Nodes and Services (through the controllers); writes what the generic controllers
//! write, Leases (leader election) and, with --use-service-account-credentials, ServiceAccounts
//! and TokenRequests in kube-system.

pub mod controller_clients;
pub mod controllers;
pub mod groups;
pub mod migration;
pub mod options;
pub mod pod_network;
pub mod readiness;
pub mod start_plan;
pub mod starter;
pub mod supervisor;
pub mod tagging_flags;
pub mod webhooks;

use std::process::ExitCode;

use clap::Parser;
use stratus_cloud::{Provider, Providers};

/// The whole process: parses flags (every upstream flag is implemented; unknown ones are
/// refused by clap), sets up logging and a two-thread runtime, and runs until a signal. Exit code
/// 2 for bad flags.
pub fn main(providers: &[&dyn Provider]) -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let opts = options::Options::parse_from(&args);
    let network = match opts.pod_network() {
        Ok(n) => n,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let controllers = controllers::enabled_controllers(&opts.controllers).unwrap_or_default();
    let checks = [
        opts.nodeipam.check(&opts.cluster_cidr),
        match controllers.contains(&controllers::TAGGING) {
            true => opts.tagging.check(),
            false => Ok(()),
        },
    ];
    if let Some(Err(message)) = checks.into_iter().find(Result::is_err) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    stratus_runtime::memory::tune_allocator();
    opts.logging.init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(supervisor::run(Providers(providers), opts, network)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
