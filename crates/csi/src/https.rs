//! The driver's HTTP endpoint over HTTPS (the EBS driver's `--metrics-cert-file` and
//! `--metrics-key-file`): the same `/metrics` and `/healthz` router, served by the shared
//! HTTPS listener (certificate files read again when they change).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use axum::Router;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use prometheus_client::registry::Registry;
use stratus_serving::handler::Body;
use stratus_serving::listener::{HttpsListener, ListenOptions, Respond};
use stratus_serving::tls::TlsSource;
use stratus_serving::tls_policy::TlsPolicy;
use tower::ServiceExt;

/// Answers with the `/metrics` and `/healthz` router.
struct RouterResponder(Router);

impl Respond for RouterResponder {
    async fn respond(&self, request: Request<Incoming>) -> Response<Body> {
        let answer = match self
            .0
            .clone()
            .oneshot(request.map(axum::body::Body::new))
            .await
        {
            Ok(a) => a,
            Err(never) => match never {},
        };
        let (parts, body) = answer.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Response::from_parts(parts, Full::new(bytes))
    }
}

/// Binds `addr` and serves `/metrics` and `/healthz` over HTTPS with the certificate of `tls`
/// until the returned listener is dropped or shut down.
pub async fn spawn_tls(
    addr: SocketAddr,
    tls: &TlsSource,
    registry: Arc<Mutex<Registry>>,
    ready: Arc<AtomicBool>,
) -> anyhow::Result<HttpsListener> {
    HttpsListener::start(
        addr,
        &ListenOptions::default(),
        tls,
        &TlsPolicy::default(),
        "--http-endpoint",
        Arc::new(RouterResponder(crate::http::router(registry, ready))),
    )
    .await
}
