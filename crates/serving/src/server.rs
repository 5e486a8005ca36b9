//! The HTTPS listener: TLS handshakes, HTTP/1.1 connections, and a graceful stop (no new
//! connections, in-flight requests finished within a grace period).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::authn::TokenAuthenticator;
use crate::authz::{AccessRule, Authorizer, DecisionTtls};
use crate::handler::Handler;
use crate::paths::AlwaysAllow;
use crate::readiness::Readiness;
use crate::tls::{server_config, TlsSource};

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections served at once; further clients wait in the listen backlog.
const MAX_CONNECTIONS: usize = 512;

/// What and how to serve.
#[derive(Debug, Clone)]
pub struct ServingConfig {
    /// `--bind-address` and `--secure-port`.
    pub address: SocketAddr,
    /// Where the certificate comes from.
    pub tls: TlsSource,
    /// `--authorization-always-allow-paths`.
    pub always_allow: AlwaysAllow,
    /// `--authentication-token-webhook-cache-ttl`.
    pub token_ttl: Duration,
    /// `--authorization-webhook-cache-{authorized,unauthorized}-ttl`.
    pub decision_ttls: DecisionTtls,
    /// What a request's access is checked against.
    pub access: AccessRule,
}

/// The API server clients that review tokens and access (`--authentication-kubeconfig`,
/// `--authorization-kubeconfig`).
#[derive(Clone)]
pub struct ReviewClients {
    /// Reviews bearer tokens.
    pub authentication: kube::Client,
    /// Reviews access.
    pub authorization: kube::Client,
}

/// A running server.
pub struct SecureServer {
    address: SocketAddr,
    readiness: Readiness,
    stop: watch::Sender<Option<Duration>>,
    task: tokio::task::JoinHandle<()>,
}

impl SecureServer {
    /// Loads or generates the certificate, binds the address (errors name the flags) and serves
    /// in a background task.
    pub async fn start(
        config: ServingConfig,
        clients: ReviewClients,
        registry: Arc<Registry>,
        readiness: Readiness,
    ) -> anyhow::Result<SecureServer> {
        let tls = server_config(&config.tls)?;
        let listener = TcpListener::bind(config.address).await.with_context(|| {
            format!(
                "--bind-address/--secure-port: cannot listen on {}",
                config.address
            )
        })?;
        let address = listener.local_addr()?;
        let handler = Arc::new(Handler {
            always_allow: config.always_allow,
            authn: TokenAuthenticator::new(clients.authentication, config.token_ttl),
            authz: Authorizer::with_rule(
                clients.authorization,
                config.decision_ttls,
                config.access,
            ),
            readiness: readiness.clone(),
            registry,
        });
        let (stop, stopped) = watch::channel(None);
        let task = tokio::spawn(serve(listener, TlsAcceptor::from(tls), handler, stopped));
        tracing::info!(%address, "serving HTTPS: /healthz, /livez, /readyz, /metrics");
        Ok(SecureServer {
            address,
            readiness,
            stop,
            task,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Stops accepting connections and waits up to `grace` for in-flight requests; `/readyz`
    /// fails from now on for connections still open.
    pub async fn shutdown(self, grace: Duration) {
        self.readiness.shutting_down();
        let _ = self.stop.send(Some(grace));
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the HTTPS server task failed");
        }
    }
}

async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Arc<Handler>,
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
        let handler = handler.clone();
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
            let service = service_fn(move |request| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(request).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(tls), service);
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
