//! A CSI driver binary started by a test in its directory: serving on `csi.sock`, logging to
//! `driver.log` (appended, so a restarted driver's log follows the first one's), keeping its loop
//! devices' backing files under `loops/`; and a gRPC channel over its socket.
//!
//! "Started" means serving: the socket file exists from `bind` on, but a connect is refused
//! until the driver listens, so readiness is a `Probe` that answers, polled until
//! [`STARTUP_DEADLINE`] (generous: the suite runs on two loaded cores). A driver that exits
//! first fails the start at once with its exit status and log.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::identity_client::IdentityClient;
use tokio::process::Child;
use tonic::transport::Channel;

use super::flow::spawn;
use crate::wait_for;

/// How long a just-started driver (or an exiting one) may take, under load.
pub const STARTUP_DEADLINE: Duration = Duration::from_secs(60);
/// How long one connect-and-Probe attempt may take before the next one.
const ATTEMPT_DEADLINE: Duration = Duration::from_secs(5);
/// The driver's log file in its directory.
const LOG: &str = "driver.log";
/// How many of the log's last lines a failure shows.
const TAIL_LINES: usize = 60;

/// The socket a driver started in `dir` serves on (give it `--endpoint=unix://<this>`).
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("csi.sock")
}

/// Where a driver started in `dir` keeps its loop devices' backing files.
pub fn loops_dir(dir: &Path) -> PathBuf {
    dir.join("loops")
}

/// The log so far of the driver started in `dir`.
pub fn driver_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LOG)).unwrap_or_default()
}

/// The tail of the log of the driver started in `dir`, as a failure's context.
pub fn log_tail(dir: &Path) -> String {
    format!(
        "the driver's log in {}:\n{}",
        dir.display(),
        super::flow::log_tail(dir, LOG, TAIL_LINES).trim_end()
    )
}

/// Starts `program args` (killed on drop) with `envs`, its stderr appended to `dir/driver.log`,
/// after removing a stale socket; its errors come without anyhow's backtrace (which would push
/// the cause out of the log's tail) unless `envs` sets `RUST_LIB_BACKTRACE`. Returns the child
/// and its socket once the driver answers `Probe` there. Fails at once when the driver exits
/// first, or after [`STARTUP_DEADLINE`] with the last attempt's error; either with the log's
/// tail.
pub async fn start(
    program: &Path,
    dir: &Path,
    args: &[String],
    envs: &[(String, String)],
) -> Result<(Child, PathBuf)> {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let socket = socket(dir);
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context(format!("removing {}", socket.display())),
    }
    let envs: Vec<(String, String)> = [("RUST_LIB_BACKTRACE".to_string(), "0".to_string())]
        .into_iter()
        .chain(envs.iter().cloned())
        .collect();
    let mut child = spawn(program, args, &dir.join(LOG), &envs)?;
    match until_serving(&socket, Some(&mut child), STARTUP_DEADLINE).await {
        Ok(Serving::Up(_)) => Ok((child, socket)),
        Ok(Serving::Exited(status)) => {
            bail!(
                "{name} exited ({status}) before serving on {}\n{}",
                socket.display(),
                log_tail(dir)
            )
        }
        Err(e) => Err(e.context(format!("{name} did not start\n{}", log_tail(dir)))),
    }
}

/// A gRPC channel over a CSI driver's unix socket, once the driver answers `Probe` there
/// (within [`STARTUP_DEADLINE`]; the error names the last attempt's cause).
pub async fn connect(socket: &Path) -> Result<Channel> {
    match until_serving(socket, None, STARTUP_DEADLINE).await? {
        Serving::Up(channel) => Ok(channel),
        Serving::Exited(status) => bail!("the driver exited ({status})"),
    }
}

/// What polling a driver's socket ended with.
enum Serving {
    /// `Probe` answered over this channel.
    Up(Channel),
    /// The driver's process (when given) exited first.
    Exited(ExitStatus),
}

/// Polls `socket` with [`probe`] until it answers, `child` (when given) exits, or `deadline`
/// passes; the one wait for a driver to serve.
async fn until_serving(
    socket: &Path,
    mut child: Option<&mut Child>,
    deadline: Duration,
) -> Result<Serving> {
    let what = format!("a CSI Probe answer on {}", socket.display());
    wait_for(&what, deadline, || {
        let exited = child.as_mut().map(|c| c.try_wait()).transpose();
        async move {
            if let Some(status) = exited.context("checking the driver's process")?.flatten() {
                return Ok(Some(Serving::Exited(status)));
            }
            probe(socket).await.map(|c| Some(Serving::Up(c)))
        }
    })
    .await
}

/// One attempt: the socket exists, a channel connects and `Probe` answers, within
/// [`ATTEMPT_DEADLINE`]; the channel.
async fn probe(socket: &Path) -> Result<Channel> {
    if !socket.exists() {
        bail!("{} does not exist yet", socket.display());
    }
    let attempt = async {
        let channel = stratus_csi_sidecars::unix::channel(socket)
            .await
            .map_err(anyhow::Error::msg)
            .context("connecting")?;
        IdentityClient::new(channel.clone())
            .probe(csi::ProbeRequest {})
            .await
            .context("Probe")?;
        Ok(channel)
    };
    tokio::time::timeout(ATTEMPT_DEADLINE, attempt)
        .await
        .with_context(|| format!("no answer within {ATTEMPT_DEADLINE:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for test `name`, emptied first.
    fn test_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stratus-csi-driver-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_driver_exiting_before_it_serves_fails_at_once_with_its_status_and_log() {
        let dir = test_dir("exits");
        let args = ["-c".into(), "echo 'no cloud config' >&2; exit 3".into()];
        let started = tokio::time::Instant::now();
        let err = start(Path::new("/bin/sh"), &dir, &args, &[])
            .await
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(started.elapsed() < Duration::from_secs(10), "{text}");
        assert!(text.contains("sh exited (exit status: 3)"), "{text}");
        assert!(text.contains("no cloud config"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// [`until_serving`]'s error after a short deadline.
    async fn never_serving(socket: &Path) -> String {
        match until_serving(socket, None, Duration::from_millis(500)).await {
            Ok(_) => panic!("{} answered", socket.display()),
            Err(e) => format!("{e:#}"),
        }
    }

    #[tokio::test]
    async fn a_socket_nobody_listens_on_fails_after_the_deadline_naming_the_cause() {
        let dir = test_dir("refused");
        // The file stays, nobody listens: connects are refused, as between bind and listen.
        let socket = socket(&dir);
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let text = never_serving(&socket).await;
        assert!(text.contains("timed out after 500ms"), "{text}");
        assert!(text.contains("connecting: transport error"), "{text}");
        assert!(text.contains("Connection refused"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_driver_refusing_connects_until_it_listens_is_waited_for() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use stratus_csi::metrics::CsiMetrics;
        use stratus_csi::{DriverInfo, Endpoint, Services};

        let dir = test_dir("late");
        let socket = socket(&dir);
        // A file nobody listens on refuses connects, as a driver between bind and listen does.
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let endpoint = Endpoint {
            path: socket.clone(),
        };
        let driver = tokio::spawn(async move {
            // Staging, not waiting: the driver listens only after some refused attempts.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let info = DriverInfo {
                name: "late.csi.stratus.test".into(),
                version: "0".into(),
            };
            let (metrics, ready) = (
                Arc::new(CsiMetrics::default()),
                Arc::new(AtomicBool::new(true)),
            );
            stratus_csi::serve(
                &endpoint,
                info,
                Services::default(),
                metrics,
                ready,
                std::future::pending(),
            )
            .await
        });
        let served = until_serving(&socket, None, Duration::from_secs(30)).await;
        driver.abort();
        match served {
            Ok(Serving::Up(_)) => {}
            Ok(Serving::Exited(status)) => panic!("exited {status}"),
            Err(e) => panic!("{e:#}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_missing_socket_is_named() {
        let dir = test_dir("missing");
        let text = never_serving(&socket(&dir)).await;
        assert!(text.contains("csi.sock does not exist yet"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
