//! dvp-csi-driver: parses its flags, sets up logging and runs the DVP CSI driver
//! (controller, node or both) until SIGTERM.

use anyhow::Context;
use clap::Parser;
use stratus_csi_dvp::app::{run, Options};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    let opts = Options::parse();
    opts.logging.init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the async runtime")?;
    runtime
        .block_on(run(opts, stratus_runtime::shutdown::signal()))
        .context("dvp-csi-driver")
}
