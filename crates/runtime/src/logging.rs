//! Logging setup: klog-style `--v` levels mapped onto tracing levels, text or JSON output.

use tracing_subscriber::EnvFilter;

/// Maps `--v=N` to a tracing filter: 0–1 info, 2–4 debug, 5+ trace; `RUST_LOG` wins when set.
pub fn filter_for_verbosity(v: u8) -> EnvFilter {
    if let Ok(f) = EnvFilter::try_from_env("RUST_LOG") {
        return f;
    }
    let level = match v {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    // Dependencies stay quieter than our own crates.
    EnvFilter::new(format!("warn,stratus={level},cloud_controller_manager={level},stratus_cloud={level},stratus_controllers={level},stratus_aws={level},stratus_runtime={level}"))
}

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
