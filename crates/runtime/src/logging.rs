//! Logging setup: klog-style `--v` levels mapped onto tracing levels, text or JSON output.

use tracing_subscriber::EnvFilter;

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

/// Every Stratus crate (the binaries and libraries) that logs.
const OUR_CRATES: &[&str] = &[
    "cloud_controller_manager",
    "ecr_credential_provider",
    "stratus_aws",
    "stratus_cloud",
    "stratus_controllers",
    "stratus_election",
    "stratus_runtime",
    "stratus_scenarios",
    "stratus_serving",
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
