//! cloud-data-discoverer: parses Deckhouse-compatible flags and environment, sets up logging and
//! runs the discovery loop on a current-thread runtime (one small process per cluster).

use anyhow::Context;
use clap::Parser;
use stratus_discoverer::app::{run, Options};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    let opts = Options::parse();
    opts.logging.init();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the async runtime")?
        .block_on(run(opts, stratus_runtime::shutdown::signal()))
        .context("cloud-data-discoverer")
}
