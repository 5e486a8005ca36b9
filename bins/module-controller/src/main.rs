//! module-controller: parses its flags, sets up logging and runs the module's glue on a
//! current-thread runtime (one small process per cluster).

use anyhow::Context;
use clap::Parser;
use stratus_module::app::{run, Options};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    let opts = Options::parse();
    opts.logging.init();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the async runtime")?
        .block_on(run(opts, stratus_runtime::shutdown::signal()))
        .context("module-controller")
}
