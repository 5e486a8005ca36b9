//! The secure server: the probes and `/metrics` behind delegated authentication and
//! authorization, on an [`HttpsListener`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::{Request, Response};
use hyper::body::Incoming;
use prometheus_client::registry::Registry;

use crate::authn::TokenAuthenticator;
use crate::authz::{AccessRule, Authorizer, DecisionTtls};
use crate::client_auth::{ClientAuth, ClientAuthSettings};
use crate::handler::{Body, Handler};
use crate::listener::{HttpsListener, ListenOptions, Respond};
use crate::paths::AlwaysAllow;
use crate::readiness::Readiness;
use crate::tls::TlsSource;
use crate::tls_policy::TlsPolicy;

/// What and how to serve.
#[derive(Debug, Clone)]
pub struct ServingConfig {
    /// `--bind-address` and `--secure-port`.
    pub address: SocketAddr,
    /// Where the certificate comes from.
    pub tls: TlsSource,
    /// `--tls-min-version` and `--tls-cipher-suites`.
    pub tls_policy: TlsPolicy,
    /// `--authorization-always-allow-paths`.
    pub always_allow: AlwaysAllow,
    /// `--authentication-token-webhook-cache-ttl`.
    pub token_ttl: Duration,
    /// `--authorization-webhook-cache-{authorized,unauthorized}-ttl`.
    pub decision_ttls: DecisionTtls,
    /// What a request's access is checked against.
    pub access: AccessRule,
    /// Client-certificate and front-proxy authentication.
    pub client_auth: ClientAuthSettings,
    /// Serve CPU profiles at `/debug/pprof/` (`--profiling`).
    pub profiling: bool,
    /// Socket and HTTP/2 settings.
    pub listen: ListenOptions,
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
    listener: HttpsListener,
    readiness: Readiness,
}

impl Respond for Handler {
    async fn respond(&self, request: Request<Incoming>) -> Response<Body> {
        self.handle(request).await
    }
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
        let flags = "--bind-address/--secure-port";
        // Bound first: a port in use is reported before anything else, as upstream.
        let socket = config
            .listen
            .bind(config.address)
            .with_context(|| format!("{flags}: cannot listen on {}", config.address))?;
        let client_auth = ClientAuth::start(&config.client_auth, &clients.authentication).await?;
        let tls_policy = TlsPolicy {
            client_certificates: config.client_auth.wanted(),
            ..config.tls_policy
        };
        let handler = Arc::new(Handler {
            client_auth,
            always_allow: config.always_allow,
            authn: TokenAuthenticator::new(clients.authentication, config.token_ttl),
            authz: Authorizer::with_rule(
                clients.authorization,
                config.decision_ttls,
                config.access,
            ),
            readiness: readiness.clone(),
            registry,
            profiling: config.profiling,
        });
        let listener =
            HttpsListener::serve_on(socket, &config.listen, &config.tls, &tls_policy, handler)?;
        let address = listener.local_addr();
        tracing::info!(%address, "serving HTTPS: /healthz, /livez, /readyz, /metrics");
        Ok(SecureServer {
            listener,
            readiness,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Stops accepting connections and waits up to `grace` for in-flight requests; `/readyz`
    /// fails from now on for connections still open.
    pub async fn shutdown(self, grace: Duration) {
        self.readiness.shutting_down();
        self.listener.shutdown(grace).await;
    }
}
