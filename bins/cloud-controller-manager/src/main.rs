//! Stratus cloud-controller-manager: parses flags, builds the provider, runs the controllers.

mod app;
mod controller_clients;
mod migration;
mod options;
mod pod_network;
mod secure_serving;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Err(message) = options::refuse_unimplemented(&args[1..]) {
        eprintln!("{message}");
        return std::process::ExitCode::from(2);
    }
    let opts = options::Options::parse_from(&args);
    let network = match opts.pod_network() {
        Ok(n) => n,
        Err(message) => {
            eprintln!("error: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    stratus_runtime::memory::tune_allocator();
    stratus_runtime::logging::init(opts.verbosity, opts.logging_format == "json");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(app::run(opts, network)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
