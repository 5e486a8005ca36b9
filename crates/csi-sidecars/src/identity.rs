//! The CSI driver as the sidecars see it: its `--csi-address` (a unix socket), a gRPC channel to
//! it, its name (Identity.GetPluginInfo, checked before it names a file) and its readiness
//! (Identity.Probe).

use std::path::{Path, PathBuf};
use std::time::Duration;

use stratus_csi_spec::v1::identity_client::IdentityClient;
use stratus_csi_spec::v1::{GetPluginInfoRequest, ProbeRequest};
use tokio::time::Instant;
use tonic::transport::Channel;

/// How often a wait for the driver tries again.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// The longest driver name CSI allows.
const MAX_NAME_LEN: usize = 63;

/// Why the driver could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// No connection to the socket.
    #[error("connecting to the CSI driver at {}: {cause}", path.display())]
    Connect {
        /// The driver's socket.
        path: PathBuf,
        /// The transport error and its causes.
        cause: String,
    },
    /// The driver answered a call with an error.
    #[error("{method} on the CSI driver at {} failed: {code:?}: {message}", path.display())]
    Call {
        /// The Identity method.
        method: &'static str,
        /// The driver's socket.
        path: PathBuf,
        /// The gRPC code.
        code: tonic::Code,
        /// The driver's message.
        message: String,
    },
    /// The driver named itself something that is not a CSI driver name.
    #[error("the CSI driver at {} reports the name {name:?}, which is not a valid CSI driver name: {reason}", path.display())]
    BadName {
        /// The driver's socket.
        path: PathBuf,
        /// The name it reported.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No answer in time.
    #[error("no answer from the CSI driver at {} within {timeout:?}{}", path.display(), last_error(last))]
    Timeout {
        /// The driver's socket.
        path: PathBuf,
        /// How long it was given.
        timeout: Duration,
        /// The last error seen while waiting, if any.
        last: Option<String>,
    },
}

impl DriverError {
    /// The gRPC code of a failed call, `None` when no call was answered.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            DriverError::Call { code, .. } => Some(*code),
            DriverError::Timeout { .. } => Some(tonic::Code::DeadlineExceeded),
            _ => None,
        }
    }
}

/// ` (last error: …)` when there was one.
fn last_error(last: &Option<String>) -> String {
    last.as_deref()
        .map(|l| format!(" (last error: {l})"))
        .unwrap_or_default()
}

/// Parses `--csi-address`: a unix socket as an absolute path, `unix:///path` or `unix:/path`.
pub fn parse_csi_address(text: &str) -> Result<PathBuf, String> {
    let path = text
        .strip_prefix("unix://")
        .or_else(|| text.strip_prefix("unix:"))
        .unwrap_or(text);
    if path.is_empty() {
        return Err("is empty (expected the path of the driver's unix socket)".into());
    }
    if !path.starts_with('/') {
        return Err(format!(
            "{text:?} is not a unix socket (expected an absolute path such as /csi/csi.sock or unix:///csi/csi.sock)"
        ));
    }
    Ok(PathBuf::from(path))
}

/// Checks a driver name as CSI defines it: at most 63 characters, alphanumerics, `-` and `.`,
/// beginning and ending with an alphanumeric.
pub fn check_driver_name(name: &str) -> Result<(), &'static str> {
    let alnum_at = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() {
        Err("it is empty")
    } else if name.len() > MAX_NAME_LEN {
        Err("it is longer than 63 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        Err("only letters, digits, '-' and '.' are allowed")
    } else if !alnum_at(name.chars().next()) || !alnum_at(name.chars().last()) {
        Err("it must begin and end with a letter or digit")
    } else {
        Ok(())
    }
}

/// Whether a Probe answer means ready: an unset `ready` counts as ready, as the spec says.
pub fn is_ready(ready: Option<bool>) -> bool {
    ready != Some(false)
}

/// Connects to the driver's socket (one attempt).
pub async fn connect(path: &Path) -> Result<Channel, DriverError> {
    crate::unix::channel(path)
        .await
        .map_err(|cause| DriverError::Connect {
            path: path.to_path_buf(),
            cause,
        })
}

/// The driver's name (Identity.GetPluginInfo), checked.
pub async fn plugin_name(channel: Channel, path: &Path) -> Result<String, DriverError> {
    let info = IdentityClient::new(channel)
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .map_err(|s| call_error("GetPluginInfo", path, s))?
        .into_inner();
    check_driver_name(&info.name).map_err(|reason| DriverError::BadName {
        path: path.to_path_buf(),
        name: info.name.clone(),
        reason,
    })?;
    Ok(info.name)
}

/// Whether the driver says it is ready (Identity.Probe).
pub async fn probe(channel: Channel, path: &Path) -> Result<bool, DriverError> {
    let answer = IdentityClient::new(channel)
        .probe(ProbeRequest {})
        .await
        .map_err(|s| call_error("Probe", path, s))?
        .into_inner();
    Ok(is_ready(answer.ready))
}

/// Connects and asks the driver's name, trying again until `timeout` has passed; the error says
/// what went wrong last.
pub async fn wait_for_name(path: &Path, timeout: Duration) -> Result<String, DriverError> {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    loop {
        let attempt = async { plugin_name(connect(path).await?, path).await };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(name)) => return Ok(name),
            // A driver that names itself wrongly will not change its mind.
            Ok(Err(e @ DriverError::BadName { .. })) => return Err(e),
            Ok(Err(e)) => {
                tracing::debug!("waiting for the CSI driver: {e}");
                last = Some(e.to_string());
            }
            Err(_) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(DriverError::Timeout {
                path: path.to_path_buf(),
                timeout,
                last,
            });
        }
        tokio::time::sleep_until(deadline.min(now + RETRY_EVERY)).await;
    }
}

fn call_error(method: &'static str, path: &Path, status: tonic::Status) -> DriverError {
    DriverError::Call {
        method,
        path: path.to_path_buf(),
        code: status.code(),
        message: status.message().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_addresses() {
        assert_eq!(
            parse_csi_address("/csi/csi.sock"),
            Ok("/csi/csi.sock".into())
        );
        assert_eq!(
            parse_csi_address("unix:///csi/csi.sock"),
            Ok("/csi/csi.sock".into())
        );
        assert_eq!(
            parse_csi_address("unix:/csi/csi.sock"),
            Ok("/csi/csi.sock".into())
        );
        for bad in [
            "",
            "unix://",
            "csi.sock",
            "localhost:10000",
            "dns:///csi:10000",
        ] {
            assert!(parse_csi_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn driver_names() {
        for ok in ["ebs.csi.aws.com", "a", "csi.dvp.deckhouse.io", "x-1.y"] {
            assert_eq!(check_driver_name(ok), Ok(()), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in ["", "../etc", "a/b", "-a", "a.", "a b", long.as_str()] {
            assert!(check_driver_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unset_readiness_is_ready() {
        assert!(is_ready(None));
        assert!(is_ready(Some(true)));
        assert!(!is_ready(Some(false)));
    }

    #[test]
    fn call_errors_carry_their_code() {
        let e = call_error("Probe", Path::new("/s"), tonic::Status::unavailable("down"));
        assert_eq!(e.code(), Some(tonic::Code::Unavailable));
        assert_eq!(
            e.to_string(),
            "Probe on the CSI driver at /s failed: Unavailable: down"
        );
    }
}
