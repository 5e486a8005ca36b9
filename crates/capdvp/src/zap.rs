//! controller-runtime's zap logging flags (`--zap-devel`, `--zap-encoder`, `--zap-log-level`,
//! `--zap-stacktrace-level`, `--zap-time-encoding`) mapped onto our tracing logs: a pure
//! resolution together with `--v`/`--logging-format` ([`LogSettings::resolve`]), then the
//! subscriber. A zap flag that is given wins over the klog-style one.
//!
//! Levels: `debug` as `--v=4`, `info` as `--v=0`, `error` (and `dpanic`, `panic`) errors only, an
//! integer N as `--v=N` (controller-runtime's verbosity `V(N)`). `--zap-devel` means debug and
//! the console encoder unless those flags say otherwise. `--zap-stacktrace-level` is checked and
//! has no effect: our log records carry no stack traces to attach.

use clap::{ArgAction, Args};
use k8s_openapi::jiff::Timestamp;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::EnvFilter;

use stratus_runtime::logging::{filter_for_verbosity, LoggingArgs};

/// The zap flags.
#[derive(Debug, Clone, Default, Args)]
pub struct ZapArgs {
    /// Development mode: debug level and the console encoder (unless --zap-log-level,
    /// --zap-encoder say otherwise).
    #[arg(long = "zap-devel", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub devel: bool,
    /// `json` or `console` (as --logging-format json/text).
    #[arg(long = "zap-encoder", value_parser = ["json", "console"])]
    pub encoder: Option<String>,
    /// `debug`, `info`, `error`, `dpanic`, `panic`, or an integer verbosity > 0.
    #[arg(long = "zap-log-level", value_parser = parse_level)]
    pub log_level: Option<ZapLevel>,
    /// `info`, `error` or `panic`: accepted and checked; no effect (no stack traces to attach).
    #[arg(long = "zap-stacktrace-level", value_parser = ["info", "error", "panic"])]
    pub stacktrace_level: Option<String>,
    /// `epoch`, `millis`, `nano`, `iso8601`, `rfc3339` or `rfc3339nano` (UTC).
    #[arg(long = "zap-time-encoding", value_parser = parse_time)]
    pub time_encoding: Option<TimeEncoding>,
}

/// `--zap-log-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZapLevel {
    /// Errors only.
    Error,
    /// A klog-style verbosity (info 0, debug 4).
    Verbosity(u8),
}

fn parse_level(value: &str) -> Result<ZapLevel, String> {
    match value {
        "debug" => Ok(ZapLevel::Verbosity(4)),
        "info" => Ok(ZapLevel::Verbosity(0)),
        "error" | "dpanic" | "panic" => Ok(ZapLevel::Error),
        other => match other.parse::<u8>() {
            Ok(n) if n > 0 => Ok(ZapLevel::Verbosity(n)),
            _ => Err("debug, info, error, dpanic, panic, or an integer > 0".into()),
        },
    }
}

/// `--zap-time-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeEncoding {
    /// Seconds since the epoch, fractional.
    Epoch,
    /// Milliseconds since the epoch, fractional.
    Millis,
    /// Nanoseconds since the epoch.
    Nano,
    /// `2006-01-02T15:04:05.000Z`.
    Iso8601,
    /// `2006-01-02T15:04:05Z`.
    Rfc3339,
    /// `2006-01-02T15:04:05.999999999Z`.
    Rfc3339Nano,
}

fn parse_time(value: &str) -> Result<TimeEncoding, String> {
    Ok(match value {
        "epoch" => TimeEncoding::Epoch,
        "millis" => TimeEncoding::Millis,
        "nano" => TimeEncoding::Nano,
        "iso8601" => TimeEncoding::Iso8601,
        "rfc3339" => TimeEncoding::Rfc3339,
        "rfc3339nano" => TimeEncoding::Rfc3339Nano,
        _ => return Err("epoch, millis, nano, iso8601, rfc3339 or rfc3339nano".into()),
    })
}

impl TimeEncoding {
    /// `at` in this encoding.
    pub fn format(self, at: Timestamp) -> String {
        let nanos = at.as_nanosecond();
        match self {
            TimeEncoding::Epoch => format!("{:.6}", nanos as f64 / 1e9),
            TimeEncoding::Millis => format!("{:.3}", nanos as f64 / 1e6),
            TimeEncoding::Nano => nanos.to_string(),
            TimeEncoding::Iso8601 => at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            TimeEncoding::Rfc3339 => at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            TimeEncoding::Rfc3339Nano => at.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
        }
    }
}

impl FormatTime for TimeEncoding {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        w.write_str(&self.format(Timestamp::now()))
    }
}

/// What the logging flags resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// The level.
    pub level: ZapLevel,
    /// One JSON object per line.
    pub json: bool,
    /// The time format (tracing's own RFC 3339 when unset).
    pub time: Option<TimeEncoding>,
}

impl LogSettings {
    /// The zap flags over the klog-style ones.
    pub fn resolve(logging: &LoggingArgs, zap: &ZapArgs) -> LogSettings {
        let klog = if zap.devel {
            logging.verbosity.max(4)
        } else {
            logging.verbosity
        };
        let json = match zap.encoder.as_deref() {
            Some(encoder) => encoder == "json",
            None => !zap.devel && logging.logging_format == "json",
        };
        LogSettings {
            level: zap.log_level.unwrap_or(ZapLevel::Verbosity(klog)),
            json,
            time: zap.time_encoding,
        }
    }

    /// The tracing filter (`RUST_LOG` wins when set).
    pub fn filter(&self) -> EnvFilter {
        match self.level {
            ZapLevel::Verbosity(v) => filter_for_verbosity(v),
            ZapLevel::Error => {
                EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new("error"))
            }
        }
    }

    /// Installs the global subscriber (to stderr).
    pub fn init(&self) {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(self.filter())
            .with_writer(std::io::stderr);
        match (self.json, self.time) {
            (true, Some(t)) => builder.json().with_timer(t).init(),
            (true, None) => builder.json().init(),
            (false, Some(t)) => builder.with_timer(t).init(),
            (false, None) => builder.init(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        logging: LoggingArgs,
        #[command(flatten)]
        zap: ZapArgs,
    }

    fn resolve(args: &[&str]) -> LogSettings {
        let f = Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap();
        LogSettings::resolve(&f.logging, &f.zap)
    }

    #[test]
    fn zap_flags_over_klog_flags() {
        let text = |level| LogSettings {
            level,
            json: false,
            time: None,
        };
        assert_eq!(resolve(&[]), text(ZapLevel::Verbosity(0)));
        assert_eq!(resolve(&["--v=2"]), text(ZapLevel::Verbosity(2)));
        assert_eq!(resolve(&["--zap-devel"]), text(ZapLevel::Verbosity(4)));
        assert_eq!(
            resolve(&["--zap-devel", "--zap-log-level=info"]),
            text(ZapLevel::Verbosity(0))
        );
        assert_eq!(
            resolve(&["--v=2", "--zap-log-level=error"]),
            text(ZapLevel::Error)
        );
        assert_eq!(
            resolve(&["--zap-log-level=5"]),
            text(ZapLevel::Verbosity(5))
        );
        assert!(resolve(&["--logging-format=json"]).json);
        assert!(!resolve(&["--logging-format=json", "--zap-encoder=console"]).json);
        assert!(resolve(&["--zap-devel", "--zap-encoder=json"]).json);
        assert!(!resolve(&["--zap-devel", "--logging-format=json"]).json);
        assert_eq!(
            resolve(&["--zap-time-encoding=rfc3339"]).time,
            Some(TimeEncoding::Rfc3339)
        );
        assert_eq!(
            resolve(&["--zap-stacktrace-level=panic"]),
            text(ZapLevel::Verbosity(0))
        );
        for bad in [
            "--zap-log-level=loud",
            "--zap-log-level=0",
            "--zap-encoder=logfmt",
            "--zap-time-encoding=unix",
            "--zap-stacktrace-level=warn",
        ] {
            let e = Flags::try_parse_from(["x", bad]).unwrap_err();
            let flag = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn time_encodings() {
        let at: Timestamp = "2026-11-28T01:02:03.456789012Z".parse().unwrap();
        let cases = [
            (TimeEncoding::Epoch, "1795827723.456789"),
            (TimeEncoding::Millis, "1795827723456.789"),
            (TimeEncoding::Nano, "1795827723456789012"),
            (TimeEncoding::Iso8601, "2026-11-28T01:02:03.456Z"),
            (TimeEncoding::Rfc3339, "2026-11-28T01:02:03Z"),
            (TimeEncoding::Rfc3339Nano, "2026-11-28T01:02:03.456789012Z"),
        ];
        for (encoding, want) in cases {
            assert_eq!(encoding.format(at), want, "{encoding:?}");
        }
    }
}
