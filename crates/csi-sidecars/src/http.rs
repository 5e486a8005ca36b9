//! The sidecars' HTTP server: binds the `--http-endpoint` address (failing with the flag's name)
//! and serves a router until told to stop.

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;

/// A bound HTTP listener, not serving yet.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
}

/// Binds `addr`; the error names `flag`, where the address came from.
pub async fn bind(addr: SocketAddr, flag: &str) -> Result<Bound, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{flag}: cannot listen on {addr}: {e}"))?;
    Ok(Bound { listener })
}

impl Bound {
    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves `router` until `stop` completes; errors are logged, not returned: health answers
    /// are the server's whole job and the kubelet notices when they stop.
    pub async fn serve(self, router: Router, stop: impl Future<Output = ()> + Send + 'static) {
        if let Err(e) = axum::serve(self.listener, router)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!("HTTP server stopped: {e}");
        }
    }
}
