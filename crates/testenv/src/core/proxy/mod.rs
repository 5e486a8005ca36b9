//! A counting and fault-injecting HTTP/1 reverse proxy in front of a cloud emulator. The core
//! knows no cloud: a [`Protocol`] names each request `service:Action`, speaks the cloud's error
//! format for injected faults, and may answer or rewrite what the emulator lacks
//! ([`crate::aws::proxy::AwsProtocol`] for moto, [`crate::openstack::proxy::OpenStackProtocol`]
//! for Keystone and the OpenStack simulators).
//!
//! Control endpoints served by the proxy itself:
//! - `GET /__stratus/counts`: the counters as a JSON object, e.g. `{"ec2:DescribeInstances": 3}`
//! - `POST /__stratus/reset`: zeroes the counters.
//! - `POST /__stratus/hold`: a JSON list of `{"action": "CreateLoadBalancer", "after_forward":
//!   false}`; matching requests are then held without an answer (before reaching moto, or after
//!   moto acted) until the client gives up or dies — a crash in the middle of a call. An empty
//!   list releases nothing already held but stops holding new requests.
//! - `POST /__stratus/release`: lets every request held so far go on (carried like any other
//!   request, or answered with the answer held back), as if the network came back.
//! - protocol-specific endpoints (AWS: `POST /__stratus/ecr-token`, see [`crate::aws::proxy`];
//!   `GET`/`POST /__stratus/ebs`, the EC2 volume knobs `VolumeInUse`, ClientToken idempotency,
//!   `attaching` and `modifying` states, see [`crate::aws::proxy::ebs`]).
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

pub mod faults;
mod thread;

use faults::{latency, pick, Timeline};
pub use faults::{Fault, FaultKind, Second};
pub use thread::ProxyThread;

/// What the proxy understood about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The service (AWS: the SigV4 signing name, `ec2`, `elasticloadbalancing`...).
    pub service: String,
    /// The API action (`DescribeInstances`, ...).
    pub action: String,
}

impl RequestInfo {
    /// The counter key, `service:Action`.
    pub fn key(&self) -> String {
        format!("{}:{}", self.service, self.action)
    }
}

/// The body of a proxied answer.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Sends a request to the emulator.
pub struct Upstream {
    uri: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// One cloud's wire protocol, as the proxy needs it.
#[async_trait::async_trait]
pub trait Protocol: Send + Sync + 'static {
    /// Names a request: service and action (`unknown` for parts that cannot be told).
    fn classify(&self, headers: &HeaderMap, uri: &Uri, body: &[u8]) -> RequestInfo;

    /// Names a request knowing its method too (REST protocols); by default [`Protocol::classify`].
    fn classify_request(
        &self,
        _method: &Method,
        headers: &HeaderMap,
        uri: &Uri,
        body: &[u8],
    ) -> RequestInfo {
        self.classify(headers, uri, body)
    }

    /// The answer to an injected throttle or server error, in the cloud's own error format:
    /// status, content type and body. `None` for faults that are not answers (latency, drop).
    fn error_answer(
        &self,
        info: &RequestInfo,
        kind: &FaultKind,
    ) -> Option<(StatusCode, &'static str, String)>;

    /// A control request under `/__stratus/` this protocol serves itself, if it is one (it may
    /// send requests of its own to `upstream`).
    async fn control(
        &self,
        _method: &Method,
        _path: &str,
        _body: &Bytes,
        _upstream: &Upstream,
    ) -> Option<Response<ProxyBody>> {
        None
    }

    /// Carries a request the proxy lets through: by default forwards it unchanged; a protocol
    /// answers itself or rewrites the answer where the emulator falls short.
    async fn exchange(
        &self,
        _info: &RequestInfo,
        parts: http::request::Parts,
        body: Bytes,
        upstream: &Upstream,
    ) -> Response<ProxyBody> {
        upstream.forward(parts, body).await
    }

    /// Extra headers of an injected error answer (e.g. `Retry-After`).
    fn error_headers(
        &self,
        _info: &RequestInfo,
        _kind: &FaultKind,
    ) -> Vec<(header::HeaderName, HeaderValue)> {
        Vec::new()
    }

    /// The upstream a request goes to (a protocol with several emulators routes here).
    fn upstream<'a>(&'a self, _info: &RequestInfo, default: &'a Upstream) -> &'a Upstream {
        default
    }

    /// Paths of the control requests [`Protocol::control`] serves.
    fn control_paths(&self) -> &'static [&'static str] {
        &[]
    }
}
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
}

impl Counters {
    /// Empty counters.
    pub fn new() -> Counters {
        Counters::default()
    }

    /// Counts one request under `key`.
    pub fn record(&self, key: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(key.to_owned()).or_default() += 1;
    }

    /// Every counter.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Zeroes the counters and the timeline.
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

    /// The fault rules from now on.
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

    /// The per-second timeline.
    pub fn timeline(&self) -> BTreeMap<u64, Second> {
        self.timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot()
    }

    /// The holds from now on.
    pub fn set_holds(&self, holds: Vec<Hold>) {
        *self.holds.lock().unwrap_or_else(|e| e.into_inner()) = holds;
    }

    /// Lets every request held so far go on.
    pub fn release_held(&self) {
        self.release.notify_waiters();
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

struct Proxy {
    upstream: Upstream,
    counters: Arc<Counters>,
    protocol: Arc<dyn Protocol>,
}

/// Serves the proxy on `listener` until the task is dropped, forwarding to `upstream`
/// (e.g. `http://127.0.0.1:5000`) and reading requests with `protocol`.
pub async fn serve(
    listener: TcpListener,
    upstream: String,
    counters: Arc<Counters>,
    protocol: Arc<dyn Protocol>,
) -> Result<()> {
    let proxy = Arc::new(Proxy {
        upstream: Upstream::new(&upstream)?,
        counters,
        protocol,
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
            (method, path) if self.protocol.control_paths().contains(&path) => {
                let (method, path) = (method.clone(), path.to_string());
                let body = match request.into_body().collect().await {
                    Ok(c) => c.to_bytes(),
                    Err(e) => {
                        return error_response(StatusCode::BAD_REQUEST, &format!("body: {e}"))
                    }
                };
                if let Some(answer) = self
                    .protocol
                    .control(&method, &path, &body, &self.upstream)
                    .await
                {
                    return answer;
                }
                return error_response(StatusCode::NOT_FOUND, &format!("{method} {path}"));
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
        let info = self
            .protocol
            .classify_request(&parts.method, &parts.headers, &parts.uri, &body);
        self.counters.record(&info.key());

        // Registered before deciding, so a release right after the decision is not missed.
        let released = self.counters.release.notified();
        let upstream = self.protocol.upstream(&info, &self.upstream);
        match self.decide(&info) {
            Decision::Forward => self.protocol.exchange(&info, parts, body, upstream).await,
            Decision::HoldRequest => {
                released.await;
                // Once released it goes on like any other request.
                self.protocol.exchange(&info, parts, body, upstream).await
            }
            Decision::HoldResponse => {
                let response = self.protocol.exchange(&info, parts, body, upstream).await;
                released.await;
                response
            }
            Decision::Inject(kind) => {
                if let Some(delay) = latency(&kind) {
                    tokio::time::sleep(delay).await;
                    return upstream.forward(parts, body).await;
                }
                match self.protocol.error_answer(&info, &kind) {
                    Some((status, content_type, text)) => {
                        let mut response = Response::new(full(text.into_bytes()));
                        *response.status_mut() = status;
                        response
                            .headers_mut()
                            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
                        for (name, value) in self.protocol.error_headers(&info, &kind) {
                            response.headers_mut().insert(name, value);
                        }
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
}

impl Upstream {
    /// An upstream at `url` (`http://127.0.0.1:PORT`).
    pub fn new(url: &str) -> Result<Upstream> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("invalid upstream URL {url:?}"))?;
        anyhow::ensure!(
            uri.scheme().is_some() && uri.authority().is_some(),
            "upstream URL {uri} needs a scheme and host"
        );
        Ok(Upstream {
            uri,
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    /// Sends the request on to the emulator, unchanged but for hop-by-hop headers.
    pub async fn forward(&self, parts: http::request::Parts, body: Bytes) -> Response<ProxyBody> {
        let mut uri = self.uri.clone().into_parts();
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

pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(crate) fn error_response(status: StatusCode, message: &str) -> Response<ProxyBody> {
    tracing::warn!("stratus proxy: {message}");
    let mut response = Response::new(full(format!("stratus proxy: {message}\n").into_bytes()));
    *response.status_mut() = status;
    response
}

pub(crate) fn full(body: Vec<u8>) -> ProxyBody {
    Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed()
}
