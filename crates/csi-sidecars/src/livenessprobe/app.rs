//! The livenessprobe's process: bind the HTTP endpoint, serve `/healthz` and the metrics until
//! SIGTERM. The driver is asked only when the kubelet probes.

use std::future::Future;
use std::sync::Arc;

use super::flags::Config;
use super::health::{router, Prober};
use crate::http;

/// Runs the livenessprobe until `shutdown` completes; fails only when the endpoint cannot be bound.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let (addr, flag) = config.http;
    let bound = http::bind(addr, flag).await?;
    tracing::info!(
        "serving /healthz and {} on {}, probing the CSI driver at {}",
        config.metrics_path,
        bound.local_addr().unwrap_or(addr),
        config.csi_socket.display()
    );
    let prober = Arc::new(Prober::new(config.csi_socket, config.probe_timeout));
    bound
        .serve(router(prober, &config.metrics_path), shutdown)
        .await;
    Ok(())
}
