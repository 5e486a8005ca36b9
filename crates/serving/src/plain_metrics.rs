//! Plain-HTTP `/metrics` (controller-runtime's `--metrics-secure=false`): the registry to anyone
//! who can reach the address, nothing else served.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::handler::{metrics_answer, text};

/// A running plain metrics endpoint; dropping it stops it.
pub struct PlainMetricsServer {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl PlainMetricsServer {
    /// Binds `address` (errors name `flag`) and serves `/metrics` in the background.
    pub async fn start(
        address: SocketAddr,
        flag: &str,
        registry: Arc<Registry>,
    ) -> anyhow::Result<PlainMetricsServer> {
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
                let registry = registry.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let response = if request.uri().path() == "/metrics" {
                            metrics_answer(&registry)
                        } else {
                            text(StatusCode::NOT_FOUND, "not found\n")
                        };
                        async move { Ok::<_, std::convert::Infallible>(response) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        tracing::info!(%address, "serving /metrics over plain HTTP");
        Ok(PlainMetricsServer { address, task })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for PlainMetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
