//! ebs-csi-driver: parses upstream-compatible flags, sets up logging and runs the EBS CSI driver
//! (controller, node or both) until SIGTERM.

use anyhow::Context;
use clap::Parser;
use stratus_csi_ebs::app::{run, Options, AWS_SDK_DEBUG_TARGETS};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    let opts = Options::parse();
    if opts.aws_sdk_debug_log {
        opts.logging.init_with_targets(AWS_SDK_DEBUG_TARGETS);
    } else {
        opts.logging.init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the async runtime")?;
    runtime
        .block_on(run(opts, stratus_runtime::shutdown::signal()))
        .context("ebs-csi-driver")
}
