//! The plain HTTP endpoints Deckhouse's discoverer serves on `--listen-address` (meant for
//! loopback behind an authorizing proxy): `/metrics`, `/healthz` (`ok`, or 503 `false` after a
//! step exhausted its retries) and an index at `/`.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::reconciler::Health;

/// Binds `address` and serves in the background; returns the bound address.
pub async fn spawn(
    address: SocketAddr,
    registry: Arc<Registry>,
    health: Health,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let (registry, health) = (registry.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let answer = answer(&registry, &health, req.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

/// The answer to a GET of `path`.
pub fn answer(registry: &Registry, health: &Health, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => (
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, "text/plain", e.to_string()),
            }
        }
        "/healthz" if health.is_ok() => (StatusCode::OK, "text/plain", "ok".to_owned()),
        "/healthz" => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", "false".to_owned()),
        "/" => (
            StatusCode::OK,
            "text/html",
            "<html><head><title>Cloud data discoverer</title></head><body><h1>Cloud data discoverer</h1>\
             <p><a href='/metrics'>Metrics</a></p><p><a href='/healthz'>Health</a></p></body></html>"
                .to_owned(),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}
