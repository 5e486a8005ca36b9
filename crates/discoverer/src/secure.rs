//! Secure metrics without a sidecar: kube-rbac-proxy's role built in. HTTPS (given or
//! self-signed certificate); `/healthz` open; everything else needs a bearer token the API server
//! accepts (TokenReview, else 401) of a user allowed the resource attributes Deckhouse configures
//! (`get` on `deployments/prometheus-metrics` named `cloud-data-discoverer` in the module
//! namespace, group `apps`; SubjectAccessReview, else 403). Token reviews are cached by the
//! shared serving crate's authenticator.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry;
use stratus_serving::authn::{bearer_token, TokenAuthenticator, User};
use stratus_serving::authz::{decision_from_status, Decision};
use stratus_serving::TlsSource;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::reconciler::Health;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The resource a scraper must be allowed to `get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsResource {
    /// The module namespace (`d8-cloud-provider-aws`).
    pub namespace: String,
    /// The Deployment's name.
    pub name: String,
}

impl MetricsResource {
    /// The review asking whether `user` may get the metrics.
    pub fn review(&self, user: &User) -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(self.namespace.clone()),
                    group: Some("apps".into()),
                    version: Some("v1".into()),
                    resource: Some("deployments".into()),
                    subresource: Some("prometheus-metrics".into()),
                    name: Some(self.name.clone()),
                    verb: Some("get".into()),
                    ..Default::default()
                }),
                non_resource_attributes: None,
            },
            ..Default::default()
        }
    }
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    /// Certificate.
    #[error("--tls-cert-file/--tls-private-key-file: {0}")]
    Tls(String),
    /// Listener.
    #[error("--secure-listen-address {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

struct Guard {
    authn: TokenAuthenticator,
    authz: kube::Client,
    resource: MetricsResource,
    registry: Arc<Registry>,
    health: Health,
}

/// Binds `address` and serves in the background; returns the bound address.
pub async fn spawn(
    address: SocketAddr,
    tls: &TlsSource,
    client: kube::Client,
    resource: MetricsResource,
    registry: Arc<Registry>,
    health: Health,
) -> Result<SocketAddr, SecureError> {
    let config = stratus_serving::tls::server_config(tls).map_err(|e| SecureError::Tls(format!("{e:#}")))?;
    let acceptor = TlsAcceptor::from(config);
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| SecureError::Listen { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| SecureError::Listen { address, source })?;
    let guard = Arc::new(Guard {
        authn: TokenAuthenticator::new(client.clone(), Duration::from_secs(10)),
        authz: client,
        resource,
        registry,
        health,
    });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, guard) = (acceptor.clone(), guard.clone());
            tokio::spawn(async move {
                let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let guard = guard.clone();
                    async move { Ok::<_, std::convert::Infallible>(guard.answer(req).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())));
    *r.status_mut() = status;
    r
}

impl Guard {
    async fn answer<B>(&self, req: http::Request<B>) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_owned();
        if path == "/healthz" {
            return crate::http::answer(&self.registry, &self.health, &path);
        }
        let Some(token) = bearer_token(req.headers()) else {
            return text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
        };
        let user = match self.authn.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return text(StatusCode::UNAUTHORIZED, "Unauthorized\n"),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot review a token (is the identity bound to system:auth-delegator?)");
                return text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
            }
        };
        let review = self.resource.review(&user);
        let answer = Api::<SubjectAccessReview>::all(self.authz.clone())
            .create(&PostParams::default(), &review)
            .await;
        match answer.map(|r| decision_from_status(r.status.as_ref())) {
            Ok(Decision::Allowed) => crate::http::answer(&self.registry, &self.health, &path),
            Ok(Decision::Denied(reason)) => {
                tracing::debug!(user = %user.name, reason, "metrics request forbidden");
                text(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "Forbidden (user={}, verb=get, resource=deployments, subresource=prometheus-metrics)\n",
                        user.name
                    ),
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot review access");
                text(StatusCode::FORBIDDEN, "Forbidden\n")
            }
        }
    }
}
