//! csi-node-driver-registrar: parses the upstream sidecar's flags, sets up logging and runs
//! `stratus_csi_sidecars::registrar::app` on a current-thread runtime. Exit codes: 0 after
//! SIGTERM (or a successful probe mode), 1 on a failure at run time (the kubelet refused the
//! driver, the driver did not answer), 2 on bad flags.

use std::process::ExitCode;

use clap::Parser;
use stratus_csi_sidecars::main_loop;
use stratus_csi_sidecars::registrar::{app, flags::Args};

fn main() -> ExitCode {
    stratus_runtime::memory::tune_allocator();
    let args = Args::parse();
    args.logging.init();
    main_loop::run(args.config(), &args.deprecations(), app::run)
}
