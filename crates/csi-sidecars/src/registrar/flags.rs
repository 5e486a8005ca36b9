//! The flags of upstream node-driver-registrar v2.15 and their validation: every problem is
//! reported at once, each naming its flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;

use crate::endpoint::{every_interface, parse_listen_address};
use crate::identity::parse_csi_address;

/// What the process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Serve the registration socket until stopped.
    Registration,
    /// Exit 0 when the kubelet has reported a successful registration, else 1 (an exec probe).
    KubeletRegistrationProbe,
}

/// Registers a CSI driver with the kubelet's plugin watcher (drop-in for
/// registry.k8s.io/sig-storage/csi-node-driver-registrar v2.15).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "csi-node-driver-registrar",
    version = stratus_runtime::build_info::version()
)]
pub struct Args {
    /// The CSI driver's socket in this container (a path or unix:///path).
    #[arg(long, default_value = "/run/csi/socket", value_name = "PATH")]
    pub csi_address: String,
    /// The driver's socket as the kubelet sees it on the node; sent to the kubelet in GetInfo.
    #[arg(long, required = true, value_name = "PATH")]
    pub kubelet_registration_path: String,
    /// The kubelet's plugin registration directory as mounted here; the socket
    /// `<driver>-reg.sock` is created in it.
    #[arg(long, default_value = "/registration", value_name = "DIR")]
    pub plugin_registration_path: PathBuf,
    /// Where `/healthz` listens (`:9809`, `$(POD_IP):9809`); empty: no HTTP server. Only one of
    /// --http-endpoint and --health-port can be set.
    #[arg(long, default_value = "", value_name = "ADDR")]
    pub http_endpoint: String,
    /// Deprecated: `/healthz` on this port of every interface; 0: no HTTP server.
    #[arg(long, default_value_t = 0, value_name = "PORT")]
    pub health_port: u16,
    /// How long to wait for the driver's answers (Go duration, e.g. 1s).
    #[arg(long, default_value = "1s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// registration, or kubelet-registration-probe (exit 0 once the kubelet reported success).
    #[arg(long, value_enum, default_value = "registration")]
    pub mode: Mode,
    /// Accepted for compatibility; profiling is not built in, so only false is allowed.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub enable_pprof: bool,
    /// Deprecated and ignored, as upstream.
    #[arg(long, value_parser = parse_go_duration, value_name = "DURATION")]
    pub connection_timeout: Option<Duration>,
    /// Logging (`--v` and the other component-base logging flags).
    #[command(flatten)]
    pub logging: LoggingArgs,
}

/// The validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The driver's socket here.
    pub csi_socket: PathBuf,
    /// The driver's socket on the node, for the kubelet.
    pub kubelet_registration_path: PathBuf,
    /// Where the registration socket goes.
    pub plugin_registration_dir: PathBuf,
    /// Where `/healthz` listens, if anywhere, and the flag that said so.
    pub http: Option<(SocketAddr, &'static str)>,
    /// The driver's answer timeout.
    pub timeout: Duration,
    /// What to do.
    pub mode: Mode,
}

impl Args {
    /// Checks the flags together; the error lists every problem, one a line.
    pub fn config(&self) -> Result<Config, String> {
        let mut problems = Vec::new();
        let csi_socket = parse_csi_address(&self.csi_address)
            .map_err(|e| problems.push(format!("--csi-address: {e}")))
            .unwrap_or_default();
        let kubelet_registration_path = PathBuf::from(&self.kubelet_registration_path);
        if self.kubelet_registration_path.is_empty() {
            problems.push(
                "--kubelet-registration-path: is required (the driver's socket path on the node)"
                    .into(),
            );
        } else if !kubelet_registration_path.is_absolute() {
            problems.push(format!(
                "--kubelet-registration-path: {:?} is not an absolute path",
                self.kubelet_registration_path
            ));
        }
        if self.plugin_registration_path.as_os_str().is_empty() {
            problems.push("--plugin-registration-path: is empty".into());
        }
        let http = match (self.http_endpoint.as_str(), self.health_port) {
            ("", 0) => None,
            ("", port) => Some((every_interface(port), "--health-port")),
            (endpoint, 0) => parse_listen_address(endpoint)
                .map_err(|e| problems.push(format!("--http-endpoint: {e}")))
                .ok()
                .map(|addr| (addr, "--http-endpoint")),
            _ => {
                problems.push("--http-endpoint, --health-port: only one of them can be set".into());
                None
            }
        };
        if self.timeout.is_zero() {
            problems.push("--timeout: must be more than 0".into());
        }
        if self.enable_pprof {
            problems.push(
                "--enable-pprof: profiling is not supported by this build; leave it false".into(),
            );
        }
        if problems.is_empty() {
            Ok(Config {
                csi_socket,
                kubelet_registration_path,
                plugin_registration_dir: self.plugin_registration_path.clone(),
                http,
                timeout: self.timeout,
                mode: self.mode,
            })
        } else {
            Err(problems.join("\n"))
        }
    }

    /// Warnings about flags that are accepted but do nothing.
    pub fn deprecations(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.connection_timeout.is_some() {
            out.push("--connection-timeout is deprecated and ignored");
        }
        if self.health_port != 0 {
            out.push("--health-port is deprecated; use --http-endpoint");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["csi-node-driver-registrar"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .config()
    }

    #[test]
    fn defaults_follow_upstream() {
        let c = parse(&["--kubelet-registration-path=/var/lib/kubelet/csi-plugins/x/csi.sock"])
            .unwrap();
        assert_eq!(c.csi_socket, PathBuf::from("/run/csi/socket"));
        assert_eq!(c.plugin_registration_dir, PathBuf::from("/registration"));
        assert_eq!(c.http, None);
        assert_eq!(c.timeout, Duration::from_secs(1));
        assert_eq!(c.mode, Mode::Registration);
    }

    #[test]
    fn the_deckhouse_arguments_parse() {
        let c = parse(&[
            "--v=5",
            "--csi-address=/csi/csi.sock",
            "--kubelet-registration-path=/var/lib/kubelet/csi-plugins/ebs.csi.aws.com/csi.sock",
            "--http-endpoint=:9809",
        ])
        .unwrap();
        assert_eq!(
            c.http,
            Some((crate::endpoint::every_interface(9809), "--http-endpoint"))
        );
        let c = parse(&[
            "--kubelet-registration-path=/k/csi.sock",
            "--health-port=9809",
            "--connection-timeout=15s",
            "--enable-pprof=false",
            "--mode=kubelet-registration-probe",
        ])
        .unwrap();
        assert_eq!(
            c.http,
            Some((crate::endpoint::every_interface(9809), "--health-port"))
        );
        assert_eq!(c.mode, Mode::KubeletRegistrationProbe);
    }

    #[test]
    fn every_bad_flag_is_named() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "--kubelet-registration-path"),
            (
                &["--kubelet-registration-path="],
                "--kubelet-registration-path: is required",
            ),
            (
                &["--kubelet-registration-path=csi.sock"],
                "--kubelet-registration-path: \"csi.sock\" is not an absolute path",
            ),
            (
                &["--kubelet-registration-path=/k", "--csi-address=csi.sock"],
                "--csi-address:",
            ),
            (
                &["--kubelet-registration-path=/k", "--http-endpoint=9809"],
                "--http-endpoint:",
            ),
            (
                &[
                    "--kubelet-registration-path=/k",
                    "--http-endpoint=:9809",
                    "--health-port=9809",
                ],
                "only one of them",
            ),
            (
                &["--kubelet-registration-path=/k", "--timeout=soon"],
                "--timeout",
            ),
            (
                &["--kubelet-registration-path=/k", "--timeout=0s"],
                "--timeout: must be more than 0",
            ),
            (
                &["--kubelet-registration-path=/k", "--mode=other"],
                "--mode",
            ),
            (
                &["--kubelet-registration-path=/k", "--enable-pprof"],
                "--enable-pprof: profiling is not supported",
            ),
            (
                &["--kubelet-registration-path=/k", "--health-port=-1"],
                "--health-port",
            ),
        ];
        for (args, want) in cases {
            let err = parse(args).expect_err(want);
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn problems_are_reported_together() {
        let err = parse(&[
            "--kubelet-registration-path=rel",
            "--csi-address=x",
            "--timeout=0s",
        ])
        .unwrap_err();
        assert_eq!(err.lines().count(), 3, "{err}");
    }
}
