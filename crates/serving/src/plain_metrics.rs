//! Plain-HTTP `/metrics` (controller-runtime's `--metrics-secure=false`): the registry to anyone
//! who can reach the address, nothing else served.

use std::net::SocketAddr;
use std::sync::Arc;

use http::StatusCode;
use prometheus_client::registry::Registry;

use crate::handler::{metrics_answer, text};
use crate::plain_http::{Answer, PlainHttpServer};

/// A running plain metrics endpoint; dropping it stops it.
pub struct PlainMetricsServer(PlainHttpServer);

impl PlainMetricsServer {
    /// Binds `address` (errors name `flag`) and serves `/metrics` in the background.
    pub async fn start(
        address: SocketAddr,
        flag: &str,
        registry: Arc<Registry>,
    ) -> anyhow::Result<PlainMetricsServer> {
        let answer: Answer = Arc::new(move |path: &str| {
            if path == "/metrics" {
                metrics_answer(&registry)
            } else {
                text(StatusCode::NOT_FOUND, "not found\n")
            }
        });
        let server = PlainHttpServer::start(address, flag, answer).await?;
        tracing::info!(address = %server.local_addr(), "serving /metrics over plain HTTP");
        Ok(PlainMetricsServer(server))
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }
}
