//! The driver's HTTP endpoint: `/metrics` (Prometheus text of the process registry) and
//! `/healthz` (200 while the CSI socket answers readiness).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

#[derive(Clone)]
struct AppState {
    registry: Arc<Mutex<Registry>>,
    ready: Arc<AtomicBool>,
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = String::new();
    let registry = state.registry.lock().expect("registry lock");
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => (
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

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// The router for `/metrics` and `/healthz`.
pub fn router(registry: Arc<Mutex<Registry>>, ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(AppState { registry, ready })
}

/// Binds `addr` and serves the router until the process ends; returns the bound address.
pub async fn spawn(
    addr: SocketAddr,
    registry: Arc<Mutex<Registry>>,
    ready: Arc<AtomicBool>,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(registry, ready);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "http endpoint stopped");
        }
    });
    Ok(bound)
}
