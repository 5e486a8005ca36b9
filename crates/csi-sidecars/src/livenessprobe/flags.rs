//! The flags of upstream livenessprobe v2.17 and their validation: every problem is reported at
//! once, each naming its flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;

use crate::endpoint::{every_interface, parse_listen_address};
use crate::identity::parse_csi_address;

/// `--health-port`'s default, upstream's.
pub const DEFAULT_HEALTH_PORT: u16 = 9808;

/// Answers the CSI driver container's liveness probe by calling Identity.Probe (drop-in for
/// registry.k8s.io/sig-storage/livenessprobe v2.17).
#[derive(Debug, Clone, Parser)]
#[command(name = "csi-livenessprobe", version = stratus_runtime::build_info::version())]
pub struct Args {
    /// The CSI driver's socket in this container (a path or unix:///path).
    #[arg(long, default_value = "/run/csi/socket", value_name = "PATH")]
    pub csi_address: String,
    /// Where `/healthz` and the metrics listen (`$(HOST_IP):9808`, `:9808`); empty: every
    /// interface on --health-port. Only one of --http-endpoint and --health-port can be set.
    #[arg(long, default_value = "", value_name = "ADDR")]
    pub http_endpoint: String,
    /// Deprecated: the port of every interface to listen on when --http-endpoint is empty
    /// [default: 9808].
    #[arg(long, value_name = "PORT")]
    pub health_port: Option<u16>,
    /// The path of the Prometheus metrics on the HTTP endpoint.
    #[arg(long, default_value = "/metrics", value_name = "PATH")]
    pub metrics_path: String,
    /// How long the driver has to answer a probe (Go duration, e.g. 1s).
    #[arg(long, default_value = "1s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub probe_timeout: Duration,
    /// Logging (`--v` and the other component-base logging flags).
    #[command(flatten)]
    pub logging: LoggingArgs,
}

/// The validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The driver's socket.
    pub csi_socket: PathBuf,
    /// Where to listen, and the flag that said so.
    pub http: (SocketAddr, &'static str),
    /// The metrics path.
    pub metrics_path: String,
    /// The probe's timeout.
    pub probe_timeout: Duration,
}

impl Args {
    /// Checks the flags together; the error lists every problem, one a line.
    pub fn config(&self) -> Result<Config, String> {
        let mut problems = Vec::new();
        let csi_socket = parse_csi_address(&self.csi_address)
            .map_err(|e| problems.push(format!("--csi-address: {e}")))
            .unwrap_or_default();
        let fallback = (every_interface(DEFAULT_HEALTH_PORT), "--health-port");
        let http = match (self.http_endpoint.as_str(), self.health_port) {
            ("", port) => (
                every_interface(port.unwrap_or(DEFAULT_HEALTH_PORT)),
                "--health-port",
            ),
            (_, Some(port)) if port != DEFAULT_HEALTH_PORT => {
                problems.push("--http-endpoint, --health-port: only one of them can be set".into());
                fallback
            }
            (endpoint, _) => parse_listen_address(endpoint)
                .map(|addr| (addr, "--http-endpoint"))
                .unwrap_or_else(|e| {
                    problems.push(format!("--http-endpoint: {e}"));
                    fallback
                }),
        };
        if !self.metrics_path.starts_with('/') {
            problems.push(format!(
                "--metrics-path: {:?} does not start with /",
                self.metrics_path
            ));
        } else if self.metrics_path == "/healthz" {
            problems.push("--metrics-path: /healthz is the health check's path".into());
        }
        if self.probe_timeout.is_zero() {
            problems.push("--probe-timeout: must be more than 0".into());
        }
        if problems.is_empty() {
            Ok(Config {
                csi_socket,
                http,
                metrics_path: self.metrics_path.clone(),
                probe_timeout: self.probe_timeout,
            })
        } else {
            Err(problems.join("\n"))
        }
    }

    /// Warnings about deprecated flags in use.
    pub fn deprecations(&self) -> Vec<&'static str> {
        match self.health_port {
            Some(_) => vec!["--health-port is deprecated; use --http-endpoint"],
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["csi-livenessprobe"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .config()
    }

    #[test]
    fn defaults_follow_upstream() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.csi_socket, PathBuf::from("/run/csi/socket"));
        assert_eq!(
            c.http,
            (crate::endpoint::every_interface(9808), "--health-port")
        );
        assert_eq!(c.metrics_path, "/metrics");
        assert_eq!(c.probe_timeout, Duration::from_secs(1));
    }

    #[test]
    fn the_deckhouse_arguments_parse() {
        let c = parse(&[
            "--csi-address=/csi/csi.sock",
            "--http-endpoint=10.0.0.5:9808",
            "--v=5",
        ])
        .unwrap();
        assert_eq!(
            c.http,
            ("10.0.0.5:9808".parse().unwrap(), "--http-endpoint")
        );
        let c = parse(&["--health-port=9810", "--probe-timeout=3s"]).unwrap();
        assert_eq!(
            c.http,
            (crate::endpoint::every_interface(9810), "--health-port")
        );
        assert_eq!(c.probe_timeout, Duration::from_secs(3));
        // The default port given explicitly does not conflict, as upstream.
        assert!(parse(&["--health-port=9808", "--http-endpoint=:9900"]).is_ok());
    }

    #[test]
    fn every_bad_flag_is_named() {
        let cases: &[(&[&str], &str)] = &[
            (&["--http-endpoint=$(HOST_IP):9808"], "--http-endpoint: "),
            (&["--http-endpoint=9808"], "--http-endpoint: "),
            (
                &["--http-endpoint=:9808", "--health-port=9000"],
                "only one of them",
            ),
            (&["--health-port=http"], "--health-port"),
            (&["--csi-address=csi.sock"], "--csi-address: "),
            (&["--metrics-path=metrics"], "--metrics-path: "),
            (&["--probe-timeout=1"], "--probe-timeout"),
            (
                &["--probe-timeout=0s"],
                "--probe-timeout: must be more than 0",
            ),
        ];
        for (args, want) in cases {
            let err = parse(args).expect_err(want);
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}
