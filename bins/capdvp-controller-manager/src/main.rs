//! capdvp-controller-manager: parses its flags, sets up logging and runs the Cluster API
//! infrastructure provider for DVP until SIGTERM.

use anyhow::Context;
use clap::Parser;
use stratus_capdvp::app::{run, Options};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    let opts = Options::parse();
    stratus_capdvp::zap::LogSettings::resolve(&opts.logging, &opts.manager.zap).init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the async runtime")?;
    runtime
        .block_on(run(opts, stratus_runtime::shutdown::signal()))
        .context("capdvp-controller-manager")
}
