//! One request: open paths are answered at once; the others need a bearer token the API server
//! accepts (401 otherwise) for a user it allows to use the path (403 otherwise).

use std::sync::Arc;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use prometheus_client::registry::Registry;

use crate::authn::{bearer_token, TokenAuthenticator, User};
use crate::authz::{Authorizer, Decision};
use crate::client_auth::ClientAuth;
use crate::paths::AlwaysAllow;
use crate::profiling::{self, ProfilePath};
use crate::readiness::Readiness;

/// The body of every answer.
pub type Body = Full<Bytes>;

/// The content type of the OpenMetrics text that `prometheus-client` writes.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz`, `/livez`: the process answers and its liveness conditions hold.
    Alive,
    /// `/readyz`: the application's readiness conditions.
    Ready,
    /// `/metrics`: the Prometheus registry.
    Metrics,
    /// Anything else.
    NotFound,
}

impl Endpoint {
    /// The endpoint `path` names.
    pub fn of(path: &str) -> Endpoint {
        match path {
            "/healthz" | "/livez" => Endpoint::Alive,
            "/readyz" => Endpoint::Ready,
            "/metrics" => Endpoint::Metrics,
            _ => Endpoint::NotFound,
        }
    }
}

/// Everything a request may need.
pub struct Handler {
    /// Paths served without a token.
    pub always_allow: AlwaysAllow,
    /// Who the client certificate (or the front proxy's headers) names.
    pub client_auth: Arc<ClientAuth>,
    /// Who the bearer token is.
    pub authn: TokenAuthenticator,
    /// Whether they may get the path.
    pub authz: Authorizer,
    /// Readiness conditions.
    pub readiness: Readiness,
    /// The metrics.
    pub registry: Arc<Registry>,
    /// Whether `/debug/pprof/` is served (`--profiling`).
    pub profiling: bool,
}

impl Handler {
    /// Answers one request.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body> {
        let method = request.method();
        if method != Method::GET && method != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let path = request.uri().path();
        if !self.always_allow.matches(path) {
            if let Err(denied) = self.check_access(&request).await {
                return denied;
            }
        }
        if self.profiling {
            if let Some(profile) = ProfilePath::of(path) {
                return profiling::answer(profile, request.uri().query()).await;
            }
        }
        match Endpoint::of(path) {
            Endpoint::Alive => {
                let report = self.readiness.liveness();
                let status = if report.ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                text(status, report.body)
            }
            Endpoint::Ready => {
                let verbose = request.uri().query().is_some_and(|q| {
                    q.split('&')
                        .any(|p| p == "verbose" || p.starts_with("verbose="))
                });
                let report = self.readiness.report(verbose);
                let status = if report.ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                text(status, report.body)
            }
            Endpoint::Metrics => self.metrics(),
            Endpoint::NotFound => text(StatusCode::NOT_FOUND, "404 page not found\n"),
        }
    }

    /// Delegated authentication, then authorization of `verb path`.
    async fn check_access<B>(&self, request: &Request<B>) -> Result<(), Response<Body>> {
        let user = self.authenticate(request).await?;
        let path = request.uri().path();
        let verb = request.method().as_str().to_ascii_lowercase();
        match self.authz.authorize(&user, path, &verb).await {
            Ok(Decision::Allowed) => Ok(()),
            Ok(Decision::Denied(reason)) => {
                tracing::debug!(user = %user.name, path, verb, reason, "request forbidden");
                let mut message = format!(
                    "forbidden: User {:?} cannot {verb} path {path:?}",
                    user.name
                );
                if !reason.is_empty() {
                    message.push_str(": ");
                    message.push_str(&reason);
                }
                Err(status(StatusCode::FORBIDDEN, "Forbidden", &message))
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), user = %user.name, path, "cannot authorize a request");
                Err(status(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    "Internal Server Error: authorization failed",
                ))
            }
        }
    }

    /// Who the request is: a front proxy's or a client certificate's user first, as Kubernetes'
    /// delegating authenticator, then the bearer token's; 401 when nobody.
    async fn authenticate<B>(&self, request: &Request<B>) -> Result<User, Response<Body>> {
        if let Some(user) = self
            .client_auth
            .authenticate(request.extensions().get(), request.headers())
        {
            return Ok(user);
        }
        let Some(token) = bearer_token(request.headers()) else {
            return Err(unauthorized());
        };
        match self.authn.authenticate(token).await {
            Ok(Some(user)) => Ok(user),
            Ok(None) => Err(unauthorized()),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot authenticate a request (does the CCM identity have system:auth-delegator?)");
                Err(unauthorized())
            }
        }
    }

    fn metrics(&self) -> Response<Body> {
        metrics_answer(&self.registry)
    }
}

/// The registry in the OpenMetrics text format (500 when it cannot be encoded).
pub fn metrics_answer(registry: &Registry) -> Response<Body> {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, registry) {
        Ok(()) => {
            let mut r = text(StatusCode::OK, body);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(METRICS_CONTENT_TYPE),
            );
            r
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot encode the metrics");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot encode the metrics\n",
            )
        }
    }
}

/// A plain-text answer (`nosniff`).
pub fn text(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn unauthorized() -> Response<Body> {
    status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
}

/// A `meta/v1` Status, as the Kubernetes servers answer errors.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = Status {
        status: Some("Failure".into()),
        message: Some(message.into()),
        reason: Some(reason.into()),
        code: Some(code.as_u16().into()),
        ..Status::default()
    };
    let mut r = text(code, serde_json::to_vec(&body).unwrap_or_default());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(Endpoint::of("/healthz"), Endpoint::Alive);
        assert_eq!(Endpoint::of("/livez"), Endpoint::Alive);
        assert_eq!(Endpoint::of("/readyz"), Endpoint::Ready);
        assert_eq!(Endpoint::of("/metrics"), Endpoint::Metrics);
        assert_eq!(Endpoint::of("/metrics/"), Endpoint::NotFound);
        assert_eq!(Endpoint::of("/"), Endpoint::NotFound);
    }

    #[test]
    fn errors_are_kubernetes_statuses() {
        let r = status(StatusCode::FORBIDDEN, "Forbidden", "forbidden: no");
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let body = body_bytes(r);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["code"], 403);
        assert_eq!(v["reason"], "Forbidden");
        assert_eq!(v["message"], "forbidden: no");
    }

    fn body_bytes(r: Response<Body>) -> Bytes {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(r.into_body().collect()).unwrap().to_bytes()
    }
}
