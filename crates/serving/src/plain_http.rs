//! A plain-HTTP listener answering every request with one function of its path: what the
//! controller-runtime style endpoints (probes, `--metrics-secure=false` metrics) share.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::handler::Body;

/// What answers a path.
pub type Answer = Arc<dyn Fn(&str) -> Response<Body> + Send + Sync>;

/// A running plain-HTTP endpoint; dropping it stops it.
pub struct PlainHttpServer {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl PlainHttpServer {
    /// Binds `address` (errors name `flag`) and serves `answer` in the background.
    pub async fn start(
        address: SocketAddr,
        flag: &str,
        answer: Answer,
    ) -> anyhow::Result<PlainHttpServer> {
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
                let answer = answer.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let response = answer(request.uri().path());
                        async move { Ok::<_, std::convert::Infallible>(response) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(PlainHttpServer { address, task })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for PlainHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
