//! node-driver-registrar's `/healthz`: healthy while the registration socket exists, answers
//! GetInfo with the driver's name and the kubelet has not refused the registration. The verdict
//! is a pure function of what was observed; the handler only observes.

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use stratus_kubelet_plugin_spec::v1::registration_client::RegistrationClient;
use stratus_kubelet_plugin_spec::v1::InfoRequest;
use tokio::sync::watch;

use super::service::Reported;

/// What the registration socket looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketState {
    /// Gone (or never there).
    Missing,
    /// There, but GetInfo on it failed or named another driver.
    Dead(String),
    /// There and answering.
    Live,
}

/// The `/healthz` answer: status code and body.
pub fn verdict(socket: &SocketState, reported: &Reported) -> (StatusCode, String) {
    match (reported, socket) {
        (Reported::Failed(error), _) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the kubelet refused the registration: {error}"),
        ),
        (_, SocketState::Missing) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "registration socket does not exist".to_string(),
        ),
        (_, SocketState::Dead(why)) => (StatusCode::INTERNAL_SERVER_ERROR, why.clone()),
        (Reported::NotYet | Reported::Registered, SocketState::Live) => {
            (StatusCode::OK, "ok".to_string())
        }
    }
}

/// What the handler needs.
#[derive(Debug, Clone)]
pub struct Health {
    /// The registration socket.
    pub socket: PathBuf,
    /// The driver it must name.
    pub driver: String,
    /// How long GetInfo may take.
    pub timeout: Duration,
    /// The kubelet's reports.
    pub reported: watch::Receiver<Reported>,
}

/// The router serving `/healthz`.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .with_state(Arc::new(health))
}

async fn healthz(State(health): State<Arc<Health>>) -> (StatusCode, String) {
    let socket = observe(&health).await;
    let reported = health.reported.borrow().clone();
    let (code, body) = verdict(&socket, &reported);
    if code.is_success() {
        tracing::debug!("health check succeeded");
    } else {
        tracing::error!("health check failed: {body}");
    }
    (code, body)
}

/// Looks at the socket and, when it is there, asks it GetInfo.
async fn observe(health: &Health) -> SocketState {
    match std::fs::metadata(&health.socket) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => return SocketState::Dead(format!("{} is not a socket", health.socket.display())),
        Err(_) => return SocketState::Missing,
    }
    match tokio::time::timeout(health.timeout, get_info(health)).await {
        Ok(Ok(name)) if name == health.driver => SocketState::Live,
        Ok(Ok(name)) => SocketState::Dead(format!(
            "the registration socket names driver {name:?}, expected {:?}",
            health.driver
        )),
        Ok(Err(e)) => SocketState::Dead(format!("GetInfo on the registration socket: {e}")),
        Err(_) => SocketState::Dead(format!(
            "GetInfo on the registration socket: no answer within {:?}",
            health.timeout
        )),
    }
}

async fn get_info(health: &Health) -> Result<String, String> {
    let channel = crate::unix::channel(&health.socket)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let info = RegistrationClient::new(channel)
        .get_info(InfoRequest {})
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    Ok(info.into_inner().name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let failed = Reported::Failed("boom".into());
        let dead = SocketState::Dead("no answer".into());
        let cases = [
            (SocketState::Live, Reported::NotYet, 200, "ok"),
            (SocketState::Live, Reported::Registered, 200, "ok"),
            (
                SocketState::Live,
                failed.clone(),
                500,
                "the kubelet refused the registration: boom",
            ),
            (
                SocketState::Missing,
                Reported::Registered,
                500,
                "registration socket does not exist",
            ),
            (SocketState::Missing, failed, 500, "refused"),
            (dead, Reported::NotYet, 500, "no answer"),
        ];
        for (socket, reported, code, body) in cases {
            let (c, b) = verdict(&socket, &reported);
            assert_eq!(c.as_u16(), code, "{socket:?} {reported:?}");
            assert!(b.contains(body), "{socket:?} {reported:?}: {b}");
        }
    }
}
