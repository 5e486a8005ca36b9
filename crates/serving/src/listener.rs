//! The HTTPS listener: TLS handshakes, HTTP/1.1 and HTTP/2 connections (ALPN), and a graceful
//! stop (no new connections, in-flight requests finished within a grace period), for any
//! [`Respond`]er (the secure metrics server, an admission webhook server).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::client_auth::PeerCertificates;
use crate::handler::Body;
use crate::tls::{server_config_with, TlsSource};
use crate::tls_policy::TlsPolicy;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections served at once; further clients wait in the listen backlog.
const MAX_CONNECTIONS: usize = 512;

/// HTTP/2 streams a client may open on one connection unless told otherwise (Go's default).
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 250;

/// How the port is bound and HTTP/2 served (`--permit-port-sharing`,
/// `--permit-address-sharing`, `--http2-max-streams-per-connection`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenOptions {
    /// SO_REUSEPORT.
    pub reuse_port: bool,
    /// SO_REUSEADDR.
    pub reuse_address: bool,
    /// HTTP/2 streams per connection; 0: [`DEFAULT_HTTP2_MAX_STREAMS`].
    pub http2_max_streams: u32,
    /// Serve HTTP/1.1 only (controller-runtime's `--enable-http2=false`, its default).
    pub http1_only: bool,
}

impl ListenOptions {
    /// A listening socket on `address` with these options.
    pub fn bind(&self, address: SocketAddr) -> std::io::Result<TcpListener> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
        socket.set_reuse_address(self.reuse_address)?;
        socket.set_reuse_port(self.reuse_port)?;
        socket.set_nonblocking(true)?;
        socket.bind(&address.into())?;
        socket.listen(1024)?;
        TcpListener::from_std(socket.into())
    }

    fn http2_streams(&self) -> u32 {
        if self.http2_max_streams == 0 {
            DEFAULT_HTTP2_MAX_STREAMS
        } else {
            self.http2_max_streams
        }
    }
}

/// What answers the requests of an [`HttpsListener`].
pub trait Respond: Send + Sync + 'static {
    /// Answers one request.
    fn respond(&self, request: Request<Incoming>) -> impl Future<Output = Response<Body>> + Send;
}

/// A running HTTPS listener.
pub struct HttpsListener {
    address: SocketAddr,
    stop: watch::Sender<Option<Duration>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpsListener {
    /// Loads the certificate of `tls`, binds `address` (errors name `flags`, the flags that chose
    /// it) and serves `responder` in a background task.
    pub async fn start<R: Respond>(
        address: SocketAddr,
        listen: &ListenOptions,
        tls: &TlsSource,
        policy: &TlsPolicy,
        flags: &str,
        responder: Arc<R>,
    ) -> anyhow::Result<HttpsListener> {
        let listener = listen
            .bind(address)
            .with_context(|| format!("{flags}: cannot listen on {address}"))?;
        HttpsListener::serve_on(listener, listen, tls, policy, responder)
    }

    /// Loads the certificate of `tls` and serves `responder` on `listener` (already bound, so
    /// that a port in use is the first problem reported, as upstream) in a background task.
    pub fn serve_on<R: Respond>(
        listener: TcpListener,
        listen: &ListenOptions,
        tls: &TlsSource,
        policy: &TlsPolicy,
        responder: Arc<R>,
    ) -> anyhow::Result<HttpsListener> {
        let mut tls = server_config_with(tls, policy)?;
        if listen.http1_only {
            Arc::make_mut(&mut tls).alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        let address = listener.local_addr()?;
        let (stop, stopped) = watch::channel(None);
        let mut http = auto::Builder::new(TokioExecutor::new());
        if listen.http1_only {
            http = http.http1_only();
        }
        http.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        http.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(listen.http2_streams());
        let task = tokio::spawn(serve(
            listener,
            TlsAcceptor::from(tls),
            Arc::new(http),
            responder,
            stopped,
        ));
        Ok(HttpsListener {
            address,
            stop,
            task,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Stops accepting connections and waits up to `grace` for in-flight requests.
    pub async fn shutdown(self, grace: Duration) {
        let _ = self.stop.send(Some(grace));
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the HTTPS server task failed");
        }
    }
}

async fn serve<R: Respond>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    http: Arc<auto::Builder<TokioExecutor>>,
    responder: Arc<R>,
    mut stop: watch::Receiver<Option<Duration>>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let grace = loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break stop.borrow().unwrap_or_default(),
            accepted = accept(&listener, &slots) => accepted,
        };
        let Some((stream, peer, slot)) = accepted else {
            continue;
        };
        let acceptor = acceptor.clone();
        let http = http.clone();
        let responder = responder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let peer_certificates = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| PeerCertificates(Arc::new(c.to_vec())));
            let service = service_fn(move |mut request: Request<Incoming>| {
                let responder = responder.clone();
                if let Some(certs) = &peer_certificates {
                    request.extensions_mut().insert(certs.clone());
                }
                async move { Ok::<_, Infallible>(responder.respond(request).await) }
            });
            let connection = http.serve_connection(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    };
    drop(listener);
    tracing::info!(
        ?grace,
        "HTTPS server stopping: finishing in-flight requests"
    );
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?grace,
            "HTTPS connections still open after the grace period; closing them"
        );
    }
}

/// The next connection, once a connection slot is free; `None` after a failed accept.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(
    tokio::net::TcpStream,
    SocketAddr,
    tokio::sync::OwnedSemaphorePermit,
)> {
    let slot = slots.clone().acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((stream, peer)) => Some((stream, peer, slot)),
        Err(e) => {
            // E.g. EMFILE: back off briefly instead of spinning.
            tracing::warn!(error = %e, "HTTPS accept failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}
