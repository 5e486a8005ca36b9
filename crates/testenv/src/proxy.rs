//! A counting HTTP/1 reverse proxy in front of moto.
//!
//! Every request is forwarded unchanged to the upstream and counted under `service:Action`:
//! the service comes from the SigV4 credential scope of the `Authorization` header, the action
//! from the `Action` parameter (query protocols: form body or URL query) or from the
//! `X-Amz-Target` header (JSON protocols). Unknown parts are counted as `unknown`.
//!
//! Control endpoints served by the proxy itself:
//! - `GET /__stratus/counts`: the counters as a JSON object, e.g. `{"ec2:DescribeInstances": 3}`
//! - `POST /__stratus/reset`: zeroes the counters.
//! - `POST /__stratus/hold`: a JSON list of `{"action": "CreateLoadBalancer", "after_forward":
//!   false}`; matching requests are then held without an answer (before reaching moto, or after
//!   moto acted) until the client gives up or dies — a crash in the middle of a call. An empty
//!   list releases nothing already held but stops holding new requests.
//! - `POST /__stratus/release`: lets every request held so far go on (forwarded, or answered
//!   with the answer held back), as if the network came back.
//! - `POST /__stratus/ecr-token`: `{"lifetime_seconds": 43200}` (or `null`) sets how long the
//!   ECR authorization tokens handed out from now on live (see below).
//!
//! Two gaps of moto are filled here, for the ECR credential provider:
//! - moto's ECR `GetAuthorizationToken` always answers `expiresAt` 2015-01-01 (already expired).
//!   With a lifetime set, the proxy rewrites `expiresAt` to now + lifetime.
//! - moto has no ECR Public service. The proxy answers ECR Public `GetAuthorizationToken` itself
//!   (counted like any request) with the fixed token `AWS:ecr-public-auth-token`, expiring after
//!   the lifetime, or on 2015-01-01 like moto's private ECR when none is set. Other ECR Public
//!   calls are forwarded to moto, which rejects them.
//!
//! - `POST /__stratus/faults`: a JSON list of [`Fault`] rules (e.g. `[{"service": "ec2",
//!   "kind": "throttle", "rate": 0.3}]`): matching requests are throttled, failed with a 5xx,
//!   delayed, or dropped; an empty list stops injecting. Usable with curl against `testenv up`.
//! - `GET /__stratus/timeline`: per-second counts (requests, injected throttles, other
//!   injected failures) keyed by Unix second.
//!
//! Per-request behaviour is decided in one place (`Proxy::decide`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// Path of the counters endpoint.
pub const COUNTS_PATH: &str = "/__stratus/counts";
/// Path of the reset endpoint.
pub const RESET_PATH: &str = "/__stratus/reset";
/// Path of the hold endpoint.
pub const HOLD_PATH: &str = "/__stratus/hold";
/// Path of the release endpoint.
pub const RELEASE_PATH: &str = "/__stratus/release";
/// Path of the fault-injection endpoint.
pub const FAULTS_PATH: &str = "/__stratus/faults";
/// Path of the per-second timeline endpoint.
pub const TIMELINE_PATH: &str = "/__stratus/timeline";

use crate::faults::{error_answer, latency, pick, Timeline};
pub use crate::faults::{Fault, FaultKind, Second};
/// Path of the ECR token lifetime endpoint.
pub const ECR_TOKEN_PATH: &str = "/__stratus/ecr-token";

/// Body of [`ECR_TOKEN_PATH`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EcrToken {
    /// Lifetime of the ECR (and ECR Public) authorization tokens answered from now on; `None`
    /// keeps moto's already expired tokens.
    pub lifetime_seconds: Option<u64>,
}

/// The password of the ECR Public token the proxy hands out (user `AWS`).
pub const ECR_PUBLIC_PASSWORD: &str = "ecr-public-auth-token";
/// `base64("AWS:ecr-public-auth-token")`.
const ECR_PUBLIC_TOKEN: &str = "QVdTOmVjci1wdWJsaWMtYXV0aC10b2tlbg==";
/// 2015-01-01T00:00:00Z, moto's fixed ECR token expiry.
const MOTO_ECR_EXPIRY: f64 = 1_420_070_400.0;

/// Requests to hold without an answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    /// API action, e.g. `CreateLoadBalancer`.
    pub action: String,
    /// Forward first (the cloud acts) and hold the answer, instead of holding the request.
    #[serde(default)]
    pub after_forward: bool,
}

/// Request counters keyed by `service:Action`, and the holds in force.
#[derive(Debug, Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<String, u64>>,
    holds: Mutex<Vec<Hold>>,
    release: tokio::sync::Notify,
    faults: Mutex<Vec<Fault>>,
    timeline: Mutex<Timeline>,
    ecr_token_lifetime: Mutex<Option<u64>>,
    /// ASG lifecycle actions answered by the proxy (see [`crate::lifecycle`]).
    lifecycle: crate::lifecycle::LifecycleState,
}

impl Counters {
    pub fn new() -> Counters {
        Counters::default()
    }

    pub fn record(&self, key: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(key.to_owned()).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn set_faults(&self, faults: Vec<Fault>) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
    }

    /// The fault (if any) a request meets; recorded in the timeline.
    fn fault_for(&self, info: &RequestInfo) -> Option<FaultKind> {
        let fault = {
            let faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
            pick(&faults, &info.service, &info.action, rand::random::<f64>).cloned()
        };
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(second, fault.as_ref());
        fault
    }

    pub fn timeline(&self) -> BTreeMap<u64, Second> {
        self.timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot()
    }

    pub fn set_holds(&self, holds: Vec<Hold>) {
        *self.holds.lock().unwrap_or_else(|e| e.into_inner()) = holds;
    }

    /// Lets every request held so far go on.
    pub fn release_held(&self) {
        self.release.notify_waiters();
    }

    /// Sets the lifetime of the ECR tokens answered from now on (see the module docs).
    pub fn set_ecr_token_lifetime(&self, seconds: Option<u64>) {
        *self
            .ecr_token_lifetime
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = seconds;
    }

    /// The `expiresAt` (Unix seconds) of an ECR token answered now, if a lifetime is set.
    fn ecr_token_expiry(&self) -> Option<f64> {
        let lifetime = (*self
            .ecr_token_lifetime
            .lock()
            .unwrap_or_else(|e| e.into_inner()))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Some((now.as_secs() + lifetime) as f64)
    }

    fn hold_for(&self, action: &str) -> Option<Hold> {
        self.holds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|h| h.action == action)
            .cloned()
    }
}

/// What the proxy understood about an AWS request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// Signing name from the SigV4 credential scope (`ec2`, `elasticloadbalancing`, ...).
    pub service: String,
    /// API action (`DescribeInstances`, ...).
    pub action: String,
}

impl RequestInfo {
    /// Identifies an AWS request from its headers, URL query and (form) body.
    pub fn classify(headers: &HeaderMap, uri: &Uri, body: &[u8]) -> RequestInfo {
        let service = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(sigv4_service)
            .unwrap_or("unknown");
        let target_action = headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .and_then(|target| target.rsplit_once('.'))
            .map(|(_, action)| action);
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
        let form_action = is_form
            .then(|| std::str::from_utf8(body).ok())
            .flatten()
            .and_then(action_param);
        let action = target_action
            .or(form_action)
            .or_else(|| uri.query().and_then(action_param))
            .unwrap_or("unknown");
        RequestInfo {
            service: service.to_owned(),
            action: action.to_owned(),
        }
    }

    /// The counter key, `service:Action`.
    pub fn key(&self) -> String {
        format!("{}:{}", self.service, self.action)
    }
}

/// `Credential=AKID/date/region/SERVICE/aws4_request` → `SERVICE`.
fn sigv4_service(authorization: &str) -> Option<&str> {
    let (_, rest) = authorization.split_once("Credential=")?;
    let scope = rest.split([',', ' ']).next()?;
    let parts: Vec<&str> = scope.split('/').collect();
    match parts.as_slice() {
        [_, _, _, service, "aws4_request"] if !service.is_empty() => Some(service),
        _ => None,
    }
}

/// The `Action` value of an `application/x-www-form-urlencoded` string.
fn action_param(form: &str) -> Option<&str> {
    form.split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "Action")
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// What to do with one request; the hook for fault injection.
#[derive(Debug, Clone, PartialEq)]
enum Decision {
    /// Pass the request to the upstream unchanged.
    Forward,
    /// Never answer (the request does not reach the upstream).
    HoldRequest,
    /// Forward, then never answer.
    HoldResponse,
    /// An injected fault.
    Inject(FaultKind),
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

struct Proxy {
    upstream: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    counters: Arc<Counters>,
}

/// Serves the proxy on `listener` until the task is dropped, forwarding to `upstream`
/// (e.g. `http://127.0.0.1:5000`).
pub async fn serve(listener: TcpListener, upstream: String, counters: Arc<Counters>) -> Result<()> {
    let upstream: Uri = upstream
        .parse()
        .with_context(|| format!("invalid upstream URL {upstream:?}"))?;
    anyhow::ensure!(
        upstream.scheme().is_some() && upstream.authority().is_some(),
        "upstream URL {upstream} needs a scheme and host"
    );
    let proxy = Arc::new(Proxy {
        upstream,
        client: Client::builder(TokioExecutor::new()).build_http(),
        counters,
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(err) => {
                // E.g. EMFILE: back off briefly instead of spinning.
                tracing::warn!("aws proxy: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let proxy = proxy.clone();
                async move {
                    let response = proxy.handle(request).await;
                    if response.extensions().get::<Dropped>().is_some() {
                        // An error from the service makes hyper close the connection unanswered.
                        return Err(std::io::Error::other("injected connection drop"));
                    }
                    Ok(response)
                }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("aws proxy: connection error: {err}");
            }
        });
    }
}

impl Proxy {
    async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        match (request.method(), request.uri().path()) {
            (&Method::GET, COUNTS_PATH) => {
                let counts = self.counters.snapshot();
                return json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&counts).unwrap_or_default(),
                );
            }
            (&Method::POST, RESET_PATH) => {
                self.counters.reset();
                return json_response(StatusCode::OK, b"{}".to_vec());
            }
            (&Method::POST, RELEASE_PATH) => {
                self.counters.release_held();
                return json_response(StatusCode::OK, b"{}".to_vec());
            }
            (&Method::GET, TIMELINE_PATH) => {
                let timeline = self.counters.timeline();
                return json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&timeline).unwrap_or_default(),
                );
            }
            (&Method::POST, FAULTS_PATH) => {
                let body = request.into_body().collect().await.map(|c| c.to_bytes());
                let faults = match body.map(|b| serde_json::from_slice::<Vec<Fault>>(&b)) {
                    Ok(Ok(faults)) => faults,
                    Ok(Err(e)) => {
                        return error_response(StatusCode::BAD_REQUEST, &format!("faults: {e}"))
                    }
                    Err(e) => {
                        return error_response(StatusCode::BAD_REQUEST, &format!("body: {e}"))
                    }
                };
                if let Some(e) = faults.iter().find_map(|f| f.validate().err()) {
                    return error_response(StatusCode::BAD_REQUEST, &format!("faults: {e}"));
                }
                self.counters.set_faults(faults);
                return json_response(StatusCode::OK, b"{}".to_vec());
            }
            (&Method::POST, ECR_TOKEN_PATH) => {
                let body = request.into_body().collect().await.map(|c| c.to_bytes());
                return match body.map(|b| serde_json::from_slice::<EcrToken>(&b)) {
                    Ok(Ok(token)) => {
                        self.counters.set_ecr_token_lifetime(token.lifetime_seconds);
                        json_response(StatusCode::OK, b"{}".to_vec())
                    }
                    Ok(Err(e)) => {
                        error_response(StatusCode::BAD_REQUEST, &format!("ecr token: {e}"))
                    }
                    Err(e) => error_response(StatusCode::BAD_REQUEST, &format!("body: {e}")),
                };
            }
            (&Method::GET, crate::lifecycle::ACTIONS_PATH) => {
                let calls = self.counters.lifecycle.calls();
                return json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&calls).unwrap_or_default(),
                );
            }
            (&Method::POST, crate::lifecycle::NOTIFY_PATH) => {
                return self.lifecycle_notify(request).await
            }
            (&Method::POST, HOLD_PATH) => {
                let body = request.into_body().collect().await.map(|c| c.to_bytes());
                return match body.map(|b| serde_json::from_slice::<Vec<Hold>>(&b)) {
                    Ok(Ok(holds)) => {
                        self.counters.set_holds(holds);
                        json_response(StatusCode::OK, b"{}".to_vec())
                    }
                    Ok(Err(e)) => error_response(StatusCode::BAD_REQUEST, &format!("holds: {e}")),
                    Err(e) => error_response(StatusCode::BAD_REQUEST, &format!("body: {e}")),
                };
            }
            _ => {}
        }

        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    &format!("reading request body: {err}"),
                )
            }
        };
        let info = RequestInfo::classify(&parts.headers, &parts.uri, &body);
        self.counters.record(&info.key());

        // Registered before deciding, so a release right after the decision is not missed.
        let released = self.counters.release.notified();
        match self.decide(&info) {
            Decision::Forward if info.service == "ecr-public" => {
                if info.action == "GetAuthorizationToken" {
                    ecr_public_token(self.counters.ecr_token_expiry())
                } else {
                    self.forward(parts, body).await
                }
            }
            Decision::Forward if info.key() == "ecr:GetAuthorizationToken" => {
                let response = self.forward(parts, body).await;
                match self.counters.ecr_token_expiry() {
                    Some(expires_at) => with_ecr_expiry(response, expires_at).await,
                    None => response,
                }
            }
            Decision::Forward if crate::lifecycle::INTERCEPTED.contains(&info.key().as_str()) => {
                let form = std::str::from_utf8(&body).unwrap_or_default();
                let (status, xml) = self.counters.lifecycle.answer(&info.action, form);
                let mut response = Response::new(full(xml.into_bytes()));
                *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
                response
            }
            Decision::Forward => self.forward(parts, body).await,
            Decision::HoldRequest => {
                released.await;
                self.forward(parts, body).await
            }
            Decision::HoldResponse => {
                let response = self.forward(parts, body).await;
                released.await;
                response
            }
            Decision::Inject(kind) => {
                if let Some(delay) = latency(&kind) {
                    tokio::time::sleep(delay).await;
                    return self.forward(parts, body).await;
                }
                match error_answer(&info.service, &kind) {
                    Some((status, xml)) => {
                        let mut response = Response::new(full(xml.into_bytes()));
                        *response.status_mut() = status;
                        response
                            .headers_mut()
                            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
                        response
                    }
                    // Drop: the caller turns this marker into a closed connection.
                    None => dropped_marker(),
                }
            }
        }
    }

    /// Decides what to do with a request (see [`Decision`]).
    fn decide(&self, info: &RequestInfo) -> Decision {
        if let Some(kind) = self.counters.fault_for(info) {
            return Decision::Inject(kind);
        }
        match self.counters.hold_for(&info.action) {
            None => Decision::Forward,
            Some(h) if h.after_forward => Decision::HoldResponse,
            Some(_) => Decision::HoldRequest,
        }
    }

    /// Puts the lifecycle hook notification to moto's EventBridge (see [`crate::lifecycle`]).
    async fn lifecycle_notify(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let body = request.into_body().collect().await.map(|c| c.to_bytes());
        let notify = match body.map(|b| serde_json::from_slice::<crate::lifecycle::Notify>(&b)) {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return error_response(StatusCode::BAD_REQUEST, &format!("notify: {e}")),
            Err(e) => return error_response(StatusCode::BAD_REQUEST, &format!("body: {e}")),
        };
        let (events, token) = crate::lifecycle::put_events_body(&notify);
        let (mut parts, ()) = Request::post("/")
            .body(())
            .expect("static request")
            .into_parts();
        for (k, v) in [
            ("x-amz-target", "AWSEvents.PutEvents"),
            ("content-type", "application/x-amz-json-1.1"),
            ("authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/events/aws4_request, SignedHeaders=host, Signature=0"),
        ] {
            parts.headers.insert(k, HeaderValue::from_static(v));
        }
        let response = self.forward(parts, Bytes::from(events)).await;
        if !response.status().is_success() {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &format!("PutEvents: {}", response.status()),
            );
        }
        json_response(
            StatusCode::OK,
            serde_json::json!({ "token": token })
                .to_string()
                .into_bytes(),
        )
    }

    async fn forward(&self, parts: http::request::Parts, body: Bytes) -> Response<ProxyBody> {
        let mut uri = self.upstream.clone().into_parts();
        uri.path_and_query = parts.uri.path_and_query().cloned();
        let uri = match Uri::from_parts(uri) {
            Ok(uri) => uri,
            Err(err) => {
                return error_response(StatusCode::BAD_GATEWAY, &format!("bad upstream URI: {err}"))
            }
        };
        let mut upstream_request = Request::new(Full::new(body));
        *upstream_request.method_mut() = parts.method;
        *upstream_request.uri_mut() = uri;
        *upstream_request.headers_mut() = without_hop_by_hop(parts.headers);
        match self.client.request(upstream_request).await {
            Ok(response) => {
                let (mut parts, body) = response.into_parts();
                parts.headers = without_hop_by_hop(parts.headers);
                Response::from_parts(parts, body.boxed())
            }
            Err(err) => error_response(
                StatusCode::BAD_GATEWAY,
                &format!("upstream request failed: {err}"),
            ),
        }
    }
}

/// The proxy's own answer to ECR Public `GetAuthorizationToken` (moto has no ECR Public).
fn ecr_public_token(expires_at: Option<f64>) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "authorizationData": {
            "authorizationToken": ECR_PUBLIC_TOKEN,
            "expiresAt": expires_at.unwrap_or(MOTO_ECR_EXPIRY),
        }
    });
    let mut response = json_response(StatusCode::OK, body.to_string().into_bytes());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    response
}

/// Rewrites every `authorizationData[].expiresAt` of a successful ECR `GetAuthorizationToken`
/// answer to `expires_at`; anything else passes unchanged.
async fn with_ecr_expiry(response: Response<ProxyBody>, expires_at: f64) -> Response<ProxyBody> {
    if !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &format!("reading the upstream answer: {err}"),
            )
        }
    };
    let rewritten = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|mut answer| {
            for data in answer.get_mut("authorizationData")?.as_array_mut()? {
                data.as_object_mut()?
                    .insert("expiresAt".to_owned(), serde_json::json!(expires_at));
            }
            serde_json::to_vec(&answer).ok()
        });
    let body = rewritten.unwrap_or_else(|| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, full(body))
}

/// Drops connection-scoped headers; the body is re-framed by hyper.
fn without_hop_by_hop(mut headers: HeaderMap) -> HeaderMap {
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers
}

/// Marks a response that must not be sent: the connection is dropped instead.
#[derive(Clone, Copy)]
struct Dropped;

fn dropped_marker() -> Response<ProxyBody> {
    let mut response = Response::new(full(Vec::new()));
    response.extensions_mut().insert(Dropped);
    response
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(status: StatusCode, message: &str) -> Response<ProxyBody> {
    tracing::warn!("aws proxy: {message}");
    let mut response = Response::new(full(format!("stratus aws proxy: {message}\n").into_bytes()));
    *response.status_mut() = status;
    response
}

fn full(body: Vec<u8>) -> ProxyBody {
    Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    header::HeaderName::from_static(k),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    const AUTH_EC2: &str = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc";

    #[test]
    fn query_protocol_form_body() {
        let h = headers(&[
            ("authorization", AUTH_EC2),
            (
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
        ]);
        let info = RequestInfo::classify(
            &h,
            &"/".parse().unwrap(),
            b"Action=DescribeRegions&Version=2016-11-15",
        );
        assert_eq!(info.key(), "ec2:DescribeRegions");
    }

    #[test]
    fn query_protocol_url_query() {
        let h = headers(&[("authorization", AUTH_EC2)]);
        let uri = "/?Version=2016-11-15&Action=DescribeInstances"
            .parse()
            .unwrap();
        assert_eq!(
            RequestInfo::classify(&h, &uri, b"").key(),
            "ec2:DescribeInstances"
        );
    }

    #[test]
    fn json_protocol_target() {
        let h = headers(&[
            ("authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-west-2/logs/aws4_request,SignedHeaders=host,Signature=x"),
            ("x-amz-target", "Logs_20140328.PutLogEvents"),
            ("content-type", "application/x-amz-json-1.1"),
        ]);
        let info = RequestInfo::classify(&h, &"/".parse().unwrap(), b"{\"Action\":\"nope\"}");
        assert_eq!(info.key(), "logs:PutLogEvents");
    }

    async fn body_json(response: Response<ProxyBody>) -> serde_json::Value {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn ecr_tokens_get_the_configured_expiry() {
        let moto = br#"{"authorizationData":[{"authorizationToken":"QVdTOng=","expiresAt":1420070400.0,"proxyEndpoint":"https://x"}]}"#;
        let response = json_response(StatusCode::OK, moto.to_vec());
        let answer = body_json(with_ecr_expiry(response, 1_900_000_000.0).await).await;
        assert_eq!(answer["authorizationData"][0]["expiresAt"], 1_900_000_000.0);
        assert_eq!(
            answer["authorizationData"][0]["authorizationToken"],
            "QVdTOng="
        );
        // Errors pass unchanged.
        let error = error_response(StatusCode::BAD_REQUEST, "nope");
        let passed = with_ecr_expiry(error, 1.0).await;
        assert_eq!(passed.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn ecr_public_tokens_are_answered_by_the_proxy() {
        let answer = body_json(ecr_public_token(Some(1_900_000_000.0))).await;
        assert_eq!(answer["authorizationData"]["expiresAt"], 1_900_000_000.0);
        assert_eq!(
            answer["authorizationData"]["authorizationToken"],
            ECR_PUBLIC_TOKEN
        );
        let answer = body_json(ecr_public_token(None)).await;
        assert_eq!(answer["authorizationData"]["expiresAt"], MOTO_ECR_EXPIRY);
    }

    #[test]
    fn unknown_parts() {
        let info = RequestInfo::classify(&HeaderMap::new(), &"/bucket/key".parse().unwrap(), b"");
        assert_eq!(info.key(), "unknown:unknown");
    }
}
