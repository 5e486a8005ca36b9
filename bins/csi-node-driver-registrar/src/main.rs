//! csi-node-driver-registrar: parses the upstream sidecar's flags, sets up logging and runs
//! `stratus_csi_sidecars::registrar::app` on a current-thread runtime. Exit codes: 0 after
//! SIGTERM (or a successful probe mode), 1 on a failure at run time (the kubelet refused the
//! driver, the driver did not answer), 2 on bad flags.

use std::process::ExitCode;

use clap::Parser;
use stratus_csi_sidecars::registrar::{app, flags::Args};

fn main() -> ExitCode {
    stratus_runtime::memory::tune_allocator();
    let args = Args::parse();
    args.logging.init();
    let config = match args.config() {
        Ok(config) => config,
        Err(problems) => {
            eprintln!("error: invalid flags:\n{problems}");
            return ExitCode::from(2);
        }
    };
    for warning in args.deprecations() {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: building the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(app::run(config, stratus_runtime::shutdown::signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
