//! aws-load-balancer-controller: parses upstream-compatible flags, sets up logging and the
//! allocator, and runs the library on a two-worker runtime.

use anyhow::Context;
use stratus_albc::options::{Options, OptionsError};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    // The values are checked by the run, with the other checks made before anything serves.
    let opts = match Options::parse_unchecked(std::env::args()) {
        Ok(o) => o,
        Err(OptionsError::Parse(text)) => {
            // clap's own output (help, version, or a usage error).
            eprint!("{text}");
            let ok =
                text.starts_with("Registers") || text.starts_with("aws-load-balancer-controller ");
            std::process::exit(if ok { 0 } else { 2 });
        }
        Err(e) => {
            eprintln!("aws-load-balancer-controller: {e}");
            std::process::exit(2);
        }
    };
    let verbosity = if opts.log_level.eq_ignore_ascii_case("debug") {
        4
    } else {
        2
    };
    stratus_runtime::logging::init(verbosity, false);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the async runtime")?
        .block_on(stratus_albc::app::run(
            opts,
            stratus_runtime::shutdown::signal(),
        ))
        .context("aws-load-balancer-controller")
}
