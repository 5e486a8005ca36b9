//! Logging setup with the component-base flags: klog-style `--v` levels and `--vmodule` file
//! patterns mapped onto tracing levels, text or JSON output, info and errors split across
//! stdout and stderr on request.

use std::time::Duration;

use clap::{ArgAction, Args};
use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, FilterExt};
use tracing_subscriber::fmt::writer::MakeWriterExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::duration::parse_go_duration;

/// `--v`, `--vmodule`, `--logging-format` and the other logging flags of Kubernetes components.
#[derive(Debug, Clone, Args)]
pub struct LoggingArgs {
    /// Log verbosity (klog-style).
    #[arg(long = "v", short = 'v', default_value_t = 0)]
    pub verbosity: u8,
    /// Per-file verbosity: comma-separated `pattern=N`, the pattern a glob (`*`, `?`) matched
    /// against the source file's name without `.rs` (or its path when the pattern has a `/`);
    /// the first matching pattern decides.
    #[arg(long = "vmodule", default_value = "", value_parser = parse_vmodule)]
    pub vmodule: VModule,
    /// Log format: `text` or `json` (one JSON object per line).
    #[arg(long = "logging-format", default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
    /// Maximum time between log flushes. Stratus writes every line at once, so lines are never
    /// held longer than this.
    #[arg(long = "log-flush-frequency", default_value = "5s", value_parser = parse_go_duration)]
    pub log_flush_frequency: Duration,
    /// Text format: info to stdout, warnings and errors to stderr.
    #[arg(long = "log-text-split-stream", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub log_text_split_stream: bool,
    /// JSON format: info to stdout, warnings and errors to stderr.
    #[arg(long = "log-json-split-stream", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub log_json_split_stream: bool,
    /// Text format with split streams: info buffer size (lines are written at once, as with 0).
    #[arg(long = "log-text-info-buffer-size", value_parser = parse_quantity)]
    pub log_text_info_buffer_size: Option<u64>,
    /// JSON format with split streams: info buffer size (lines are written at once, as with 0).
    #[arg(long = "log-json-info-buffer-size", value_parser = parse_quantity)]
    pub log_json_info_buffer_size: Option<u64>,
}

impl LoggingArgs {
    /// Installs the global subscriber these flags ask for.
    pub fn init(&self) {
        let json = self.logging_format == "json";
        let split = if json {
            self.log_json_split_stream
        } else {
            self.log_text_split_stream
        };
        install(self.verbosity, &self.vmodule, &[], json, split);
    }

    /// As [`LoggingArgs::init`], with the events of each `(target prefix, verbosity)` of
    /// `targets` shown up to that verbosity whatever `--v` says (e.g. an SDK's debug log asked
    /// for by a flag).
    pub fn init_with_targets(&self, targets: &[(&'static str, u8)]) {
        let json = self.logging_format == "json";
        let split = if json {
            self.log_json_split_stream
        } else {
            self.log_text_split_stream
        };
        install(self.verbosity, &self.vmodule, targets, json, split);
    }

    /// The flags that are alpha options upstream (they need the `LoggingAlphaOptions` gate).
    pub fn alpha_options_in_use(&self) -> Vec<&'static str> {
        let mut used = Vec::new();
        if self.log_text_split_stream {
            used.push("--log-text-split-stream");
        }
        if self.log_json_split_stream {
            used.push("--log-json-split-stream");
        }
        if self.log_text_info_buffer_size.is_some() {
            used.push("--log-text-info-buffer-size");
        }
        if self.log_json_info_buffer_size.is_some() {
            used.push("--log-json-info-buffer-size");
        }
        used
    }
}

/// `--vmodule`: file patterns and their verbosity, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VModule(pub Vec<(String, u8)>);

/// Parses `pattern=N,…`.
pub fn parse_vmodule(value: &str) -> Result<VModule, String> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (pattern, level) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected pattern=N"))?;
        let level = level
            .trim()
            .parse::<u8>()
            .map_err(|_| format!("{item:?}: N must be a verbosity (0-255)"))?;
        if pattern.trim().is_empty() {
            return Err(format!("{item:?}: empty pattern"));
        }
        out.push((pattern.trim().to_string(), level));
    }
    Ok(VModule(out))
}

impl VModule {
    /// The verbosity the first pattern matching `file` gives, if any.
    pub fn level_for(&self, file: &str) -> Option<u8> {
        let path = file.strip_suffix(".rs").unwrap_or(file);
        let base = path.rsplit('/').next().unwrap_or(path);
        self.0
            .iter()
            .find(|(pattern, _)| glob(pattern, if pattern.contains('/') { path } else { base }))
            .map(|(_, v)| *v)
    }

    /// `Some(enabled)` when a pattern matches the event's file, `None` otherwise.
    pub fn decides(&self, meta: &Metadata<'_>) -> Option<bool> {
        let level = self.level_for(meta.file()?)?;
        Some(level >= klog_level(meta.level()))
    }
}

/// The `--v` a tracing level needs: info 0, debug 3, trace 5 (warnings and errors always).
fn klog_level(level: &tracing::Level) -> u8 {
    match *level {
        tracing::Level::TRACE => 5,
        tracing::Level::DEBUG => 3,
        _ => 0,
    }
}

/// Glob match with `*` (any run) and `?` (one character), as klog's vmodule patterns.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A Kubernetes resource quantity of bytes (`1Mi`, `64k`, `1024`).
fn parse_quantity(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| "not a quantity (e.g. 64Ki, 1Mi, 1024)".to_string())?;
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => return Err("not a quantity (e.g. 64Ki, 1Mi, 1024)".into()),
    };
    n.checked_mul(factor)
        .ok_or_else(|| "quantity too large".to_string())
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

/// Installs the global subscriber (to stderr) for `--v=v`.
pub fn init(v: u8, json: bool) {
    install(v, &VModule::default(), &[], json, false);
}

/// Whether one of `targets` (prefix, verbosity) shows the event `meta`.
fn target_shows(targets: &[(&'static str, u8)], meta: &Metadata<'_>) -> bool {
    targets
        .iter()
        .any(|(prefix, v)| meta.target().starts_with(prefix) && *v >= klog_level(meta.level()))
}

fn install(v: u8, vmodule: &VModule, targets: &[(&'static str, u8)], json: bool, split: bool) {
    let by_file = vmodule.clone();
    let matched = vmodule.clone();
    let targets = targets.to_vec();
    // A matching --vmodule pattern decides; other events follow --v (or a target's verbosity).
    let filter = filter_fn(move |m| by_file.decides(m) == Some(true))
        .or(filter_for_verbosity(v).and(filter_fn(move |m| matched.decides(m).is_none())))
        .or(filter_fn(move |m| target_shows(&targets, m)));
    let writer = std::io::stderr
        .with_max_level(tracing::Level::WARN)
        .or_else(if split {
            BoxMakeWriter::stdout()
        } else {
            BoxMakeWriter::stderr()
        });
    let layer = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_filter(filter)
            .boxed()
    };
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// stdout or stderr, chosen at start.
#[derive(Clone, Copy)]
enum BoxMakeWriter {
    Stdout,
    Stderr,
}

impl BoxMakeWriter {
    fn stdout() -> Self {
        BoxMakeWriter::Stdout
    }
    fn stderr() -> Self {
        BoxMakeWriter::Stderr
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BoxMakeWriter {
    type Writer = Box<dyn std::io::Write + 'a>;
    fn make_writer(&'a self) -> Self::Writer {
        match self {
            BoxMakeWriter::Stdout => Box::new(std::io::stdout()),
            BoxMakeWriter::Stderr => Box::new(std::io::stderr()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmodule_patterns() {
        let vm = parse_vmodule("service*=4, crates/ccm/src/start?plan=5,node=2").unwrap();
        assert_eq!(
            vm.level_for("crates/providers/aws/src/service_lb.rs"),
            Some(4)
        );
        assert_eq!(vm.level_for("crates/ccm/src/start_plan.rs"), Some(5));
        assert_eq!(vm.level_for("crates/controllers/src/node.rs"), Some(2));
        assert_eq!(
            vm.level_for("crates/controllers/src/node_lifecycle.rs"),
            None
        );
        assert_eq!(vm.level_for("crates/ccm/src/start_plan_x.rs"), None);
        assert_eq!(parse_vmodule("").unwrap(), VModule::default());
        for bad in ["service", "=3", "x=high", "x=300"] {
            assert!(parse_vmodule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("a*c", "abbbc"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*lb*", "service_lb_driver"));
        assert!(!glob("lb", "lbx"));
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("1Mi").unwrap(), 1 << 20);
        assert_eq!(parse_quantity("64k").unwrap(), 64_000);
        assert_eq!(parse_quantity("0").unwrap(), 0);
        assert!(parse_quantity("1Q").is_err());
        assert!(parse_quantity("x").is_err());
    }

    #[test]
    fn klog_levels() {
        assert_eq!(klog_level(&tracing::Level::INFO), 0);
        assert_eq!(klog_level(&tracing::Level::DEBUG), 3);
        assert_eq!(klog_level(&tracing::Level::TRACE), 5);
        assert_eq!(klog_level(&tracing::Level::ERROR), 0);
    }
}
