//! Logging setup: klog-style `--v` levels mapped onto tracing levels, text or JSON output.

use clap::Args;
use tracing_subscriber::EnvFilter;

/// `--v` and `--logging-format`, as klog-based components spell them.
#[derive(Debug, Clone, Args)]
pub struct LoggingArgs {
    /// Log verbosity (klog-style).
    #[arg(long = "v", short = 'v', default_value_t = 0)]
    pub verbosity: u8,
    /// Log format: `text` or `json` (one JSON object per line).
    #[arg(long = "logging-format", default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
}

impl LoggingArgs {
    /// Installs the global subscriber these flags ask for.
    pub fn init(&self) {
        init(self.verbosity, self.logging_format == "json");
    }
}

/// Maps `--v=N` to a tracing filter as klog uses its levels: 0–2 info (2 is the usual
/// production setting), 3–4 debug, 5+ trace; `RUST_LOG` wins when set.
pub fn filter_for_verbosity(v: u8) -> EnvFilter {
    if let Ok(f) = EnvFilter::try_from_env("RUST_LOG") {
        return f;
    }
    let level = match v {
        0..=2 => "info",
        3 | 4 => "debug",
        _ => "trace",
    };
    // Dependencies stay quieter than our own crates.
    let ours = OUR_CRATES
        .iter()
        .map(|c| format!(",{c}={level}"))
        .collect::<String>();
    EnvFilter::new(format!("warn{ours}"))
}

/// Target prefixes of every Stratus crate that logs: the libraries (`stratus_*`) and the
/// binaries (a directive matches every target it prefixes).
const OUR_CRATES: &[&str] = &[
    "stratus",
    "cloud_controller_manager",
    "ecr_credential_provider",
];

/// Installs the global subscriber (to stderr).
pub fn init(v: u8, json: bool) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter_for_verbosity(v))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
