//! node-termination-handler: parses upstream-compatible flags and environment, sets up logging
//! and the allocator, and runs the library (current-thread runtime in IMDS mode for a small
//! footprint; two workers in queue mode).

use anyhow::Context;
use stratus_termination::config::{Mode, Options};

fn main() -> anyhow::Result<()> {
    stratus_runtime::memory::tune_allocator();
    // Validated by the run, together with the other checks made before anything serves.
    let opts = match Options::parse_args(std::env::args()) {
        Ok(o) => o,
        Err(stratus_termination::config::ConfigError::Parse(text)) => {
            // clap's own output (help, version, or a usage error).
            eprint!("{text}");
            let help = text.starts_with("Cordons") || text.starts_with("node-termination-handler ");
            std::process::exit(if help { 0 } else { 2 });
        }
        Err(e) => {
            eprintln!("node-termination-handler: {e}");
            std::process::exit(2);
        }
    };
    init_logging(&opts);
    let runtime = match opts.mode() {
        Mode::Imds => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Mode::Queue => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    }
    .context("building the async runtime")?;
    runtime
        .block_on(stratus_termination::app::run(
            opts,
            stratus_runtime::shutdown::signal(),
        ))
        .context("node-termination-handler")?;
    Ok(())
}

fn init_logging(opts: &Options) {
    let level = match opts.log_level.to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "error" => "error",
        _ => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "warn,stratus_termination={level},node_termination_handler={level},stratus_aws={level}"
        ))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if opts.json_logging {
        builder.json().init();
    } else {
        builder.init();
    }
}
