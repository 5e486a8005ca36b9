//! The plain-HTTP probe endpoint of a controller-runtime manager (`--health-probe-bind-address`,
//! `:8081` by default in kubebuilder's layout, which Deckhouse's capdvp template probes):
//! `/healthz` and `/livez` from the liveness conditions, `/readyz` from the readiness ones, no
//! authentication (probes carry none) and nothing else served.

use std::net::SocketAddr;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::handler::{text, Body, Endpoint};
use crate::readiness::Readiness;

/// The answer to `path`.
pub fn answer(readiness: &Readiness, path: &str) -> Response<Body> {
    let report = match Endpoint::of(path) {
        Endpoint::Alive => readiness.liveness(),
        Endpoint::Ready => readiness.report(false),
        Endpoint::Metrics | Endpoint::NotFound => {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
    };
    let code = if report.ready {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text(code, report.body)
}

/// A running probe endpoint.
pub struct ProbeServer {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ProbeServer {
    /// Binds `address` (errors name `flag`) and answers probes in the background.
    pub async fn start(
        address: SocketAddr,
        flag: &str,
        readiness: Readiness,
    ) -> anyhow::Result<ProbeServer> {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|e| anyhow::anyhow!("{flag}: cannot listen on {address}: {e}"))?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let readiness = readiness.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let response = answer(&readiness, request.uri().path());
                        async move { Ok::<_, std::convert::Infallible>(response) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        tracing::info!(%address, "serving probes over HTTP: /healthz, /livez, /readyz");
        Ok(ProbeServer { address, task })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for ProbeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A controller-runtime bind address flag's value: an address, or off (`0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

/// A controller-runtime bind address: `:8081` (every interface), `host:port`, or `0` (off).
pub fn parse_bind_address(value: &str) -> Result<BindAddress, String> {
    let value = value.trim();
    if value == "0" {
        return Ok(BindAddress(None));
    }
    let with_host = if let Some(port) = value.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        value.to_string()
    };
    with_host
        .parse::<SocketAddr>()
        .map(|a| BindAddress(Some(a)))
        .map_err(|_| "not an address (`:8081`, `127.0.0.1:8081`, or `0` to turn it off)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_as_controller_runtime() {
        assert_eq!(
            parse_bind_address(":8081").unwrap().0,
            Some("0.0.0.0:8081".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9440").unwrap().0,
            Some("127.0.0.1:9440".parse().unwrap())
        );
        assert_eq!(parse_bind_address("0").unwrap().0, None);
        assert!(parse_bind_address("eight").is_err());
    }

    #[test]
    fn probes_follow_the_conditions() {
        let readiness = Readiness::default();
        let synced = readiness.add("informer-sync", "not listed yet");
        assert_eq!(answer(&readiness, "/healthz").status(), StatusCode::OK);
        assert_eq!(
            answer(&readiness, "/readyz").status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        synced.set();
        assert_eq!(answer(&readiness, "/readyz").status(), StatusCode::OK);
        assert_eq!(
            answer(&readiness, "/metrics").status(),
            StatusCode::NOT_FOUND
        );
    }
}
