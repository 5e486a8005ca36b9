//! The livenessprobe's HTTP answers: `/healthz` connects to the driver and asks Identity.Probe
//! within the timeout (200 `ok` when ready, an unset `ready` counting as ready; 500 with the
//! reason otherwise) and the metrics path renders [`Metrics`]. The verdict is a pure function of
//! the probe's outcome.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::time::Instant;

use super::metrics::{Metrics, GET_PLUGIN_INFO, PROBE};
use crate::identity::{self, DriverError};

/// The driver's name in the metrics until GetPluginInfo has answered.
const UNKNOWN_DRIVER: &str = "unknown";

/// The `/healthz` answer for a probe's outcome (`Ok(ready)`).
pub fn verdict(outcome: &Result<bool, DriverError>) -> (StatusCode, String) {
    match outcome {
        Ok(true) => (StatusCode::OK, "ok".to_string()),
        Ok(false) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "driver responded but is not ready".to_string(),
        ),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// What the handlers need.
#[derive(Debug)]
pub struct Prober {
    /// The driver's socket.
    pub socket: PathBuf,
    /// How long one probe may take.
    pub timeout: Duration,
    /// The calls' metrics.
    pub metrics: Metrics,
    /// The driver's name, once it has said it.
    pub driver: OnceLock<String>,
}

impl Prober {
    /// A prober of the driver at `socket`.
    pub fn new(socket: PathBuf, timeout: Duration) -> Self {
        Self {
            socket,
            timeout,
            metrics: Metrics::default(),
            driver: OnceLock::new(),
        }
    }

    /// Probes the driver once, within the timeout.
    pub async fn probe(&self) -> Result<bool, DriverError> {
        match tokio::time::timeout(self.timeout, self.probe_untimed()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(DriverError::Timeout {
                path: self.socket.clone(),
                timeout: self.timeout,
                last: None,
            }),
        }
    }

    async fn probe_untimed(&self) -> Result<bool, DriverError> {
        let channel = identity::connect(&self.socket).await?;
        if self.driver.get().is_none() {
            // Only the metrics' label needs the name: a driver that will not say it is still probed.
            match self
                .timed(
                    GET_PLUGIN_INFO,
                    identity::plugin_name(channel.clone(), &self.socket),
                )
                .await
            {
                Ok(name) => {
                    tracing::info!("CSI driver name: {name}");
                    let _ = self.driver.set(name);
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        self.timed(PROBE, identity::probe(channel, &self.socket))
            .await
    }

    /// Runs one call, recording its duration and code.
    async fn timed<T>(
        &self,
        method: &str,
        call: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        let started = Instant::now();
        let outcome = call.await;
        let code = match &outcome {
            Ok(_) => Some(tonic::Code::Ok),
            Err(e) => e.code(),
        };
        if let Some(code) = code {
            let driver = self.driver.get().map_or(UNKNOWN_DRIVER, String::as_str);
            self.metrics
                .observe(driver, method, code, started.elapsed().as_secs_f64());
        }
        outcome
    }
}

/// The router of `/healthz` and `metrics_path`.
pub fn router(prober: Arc<Prober>, metrics_path: &str) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route(metrics_path, get(metrics))
        .with_state(prober)
}

async fn healthz(State(prober): State<Arc<Prober>>) -> (StatusCode, String) {
    let outcome = prober.probe().await;
    let (code, body) = verdict(&outcome);
    if code.is_success() {
        tracing::debug!("health check succeeded");
    } else {
        tracing::error!("health check failed: {body}");
    }
    (code, body)
}

async fn metrics(State(prober): State<Arc<Prober>>) -> Response {
    match prober.metrics.render() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(verdict(&Ok(true)), (StatusCode::OK, "ok".to_string()));
        let (code, body) = verdict(&Ok(false));
        assert_eq!(
            (code.as_u16(), body.as_str()),
            (500, "driver responded but is not ready")
        );
        let err = DriverError::Connect {
            path: "/csi/csi.sock".into(),
            cause: "No such file or directory".into(),
        };
        let (code, body) = verdict(&Err(err));
        assert_eq!(code.as_u16(), 500);
        assert!(
            body.contains("/csi/csi.sock") && body.contains("No such file"),
            "{body}"
        );
    }
}
