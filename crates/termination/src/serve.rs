//! Plain-HTTP endpoints as upstream serves them: Prometheus metrics at `/metrics`
//! (`--prometheus-server-port`) and the liveness probe (`--probes-server-endpoint` on
//! `--probes-server-port`).

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

/// What a listener answers.
#[derive(Clone)]
pub enum Endpoint {
    /// The registry in OpenMetrics text at `/metrics`.
    Metrics(Arc<Registry>),
    /// `{"Health":"OK"}` at this path (`--probes-server-endpoint`, default `/healthz`).
    Probe(String),
}

/// Binds `0.0.0.0:port` and serves `endpoint` in the background.
pub async fn spawn(port: u16, endpoint: Endpoint) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let endpoint = endpoint.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&endpoint, req.uri().path())) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

fn answer(endpoint: &Endpoint, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match endpoint {
        Endpoint::Metrics(registry) if path == "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => (
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    e.to_string(),
                ),
            }
        }
        Endpoint::Probe(probe) if path == probe => (
            StatusCode::OK,
            "application/json",
            r#"{"Health":"OK"}"#.to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}
