//! csi-livenessprobe: parses the upstream sidecar's flags, sets up logging and runs
//! `stratus_csi_sidecars::livenessprobe::app` on a current-thread runtime. Exit codes: 0 after
//! SIGTERM, 1 when the HTTP endpoint cannot be bound, 2 on bad flags.

use std::process::ExitCode;

use clap::Parser;
use stratus_csi_sidecars::livenessprobe::{app, flags::Args};
use stratus_csi_sidecars::main_loop;

fn main() -> ExitCode {
    stratus_runtime::memory::tune_allocator();
    let args = Args::parse();
    args.logging.init();
    main_loop::run(args.config(), &args.deprecations(), app::run)
}
