//! The AWS protocol of the proxy, for moto: requests are named `service:Action` (the service
//! from the SigV4 credential scope of `Authorization`, the action from the `Action` parameter of
//! query protocols, in the form body or URL query, or from `X-Amz-Target` for JSON protocols;
//! unknown parts count as `unknown`), injected errors speak each service's XML, and gaps of moto
//! are filled.
//!
//! Two gaps are filled for the ECR credential provider:
//! - moto's ECR `GetAuthorizationToken` always answers `expiresAt` 2015-01-01 (already expired).
//!   With a lifetime set (`POST /__stratus/ecr-token` with `{"lifetime_seconds": 43200}` or
//!   `null`), the proxy rewrites `expiresAt` to now + lifetime.
//! - moto has no ECR Public service. The proxy answers ECR Public `GetAuthorizationToken` itself
//!   (counted like any request) with the fixed token `AWS:ecr-public-auth-token`, expiring after
//!   the lifetime, or on 2015-01-01 like moto's private ECR when none is set. Other ECR Public
//!   calls are forwarded to moto, which rejects them.
//!
//! And one for the cloud-controller-manager: moto has no EC2 `DescribeInstanceTopology`; the
//! proxy answers it (see [`topology`]).
//!
//! EC2 volume states and errors moto skips are knobs of [`ebs`].
//!
//! Moto drops request fields it does not model (an NLB's subnet-mapping private addresses), so
//! the form bodies of the actions in [`RECORDED_BODIES`] are kept and served at
//! [`REQUEST_BODIES_PATH`] for tests to read what was asked.

pub mod ebs;
pub mod paging;
pub mod topology;

use std::sync::{Arc, Mutex};

use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Bytes;

use crate::core::proxy::FaultKind;
use crate::core::proxy::{
    error_response, full, json_response, Protocol, ProxyBody, RequestInfo, Upstream,
};

/// Path of the ECR token lifetime endpoint.
pub const ECR_TOKEN_PATH: &str = "/__stratus/ecr-token";

/// Body of [`ECR_TOKEN_PATH`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EcrToken {
    /// Lifetime of the ECR (and ECR Public) authorization tokens answered from now on; `None`
    /// keeps moto's already expired tokens.
    pub lifetime_seconds: Option<u64>,
}

/// Path of the recorded request bodies (`GET`: `[[key, form body], ...]` in arrival order).
pub const REQUEST_BODIES_PATH: &str = "/__stratus/request-bodies";
/// The `service:Action` keys whose form bodies are recorded.
/// (moto drops parts of them: subnet-mapping addresses, ALPN policies, and a TLS listener's
/// certificate on ModifyListener).
pub const RECORDED_BODIES: &[&str] = &[
    "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:CreateListener",
    "elasticloadbalancing:ModifyListener",
];

/// The password of the ECR Public token the proxy hands out (user `AWS`).
pub const ECR_PUBLIC_PASSWORD: &str = "ecr-public-auth-token";
/// `base64("AWS:ecr-public-auth-token")`.
const ECR_PUBLIC_TOKEN: &str = "QVdTOmVjci1wdWJsaWMtYXV0aC10b2tlbg==";
/// 2015-01-01T00:00:00Z, moto's fixed ECR token expiry.
const MOTO_ECR_EXPIRY: f64 = 1_420_070_400.0;

/// The AWS protocol, with the ECR token lifetime it answers with and the ASG lifecycle actions
/// it answers for moto (see [`crate::aws::lifecycle`]).
#[derive(Debug, Default)]
pub struct AwsProtocol {
    ecr_token_lifetime: Mutex<Option<u64>>,
    lifecycle: crate::aws::lifecycle::LifecycleState,
    paged: paging::PagedAnswers,
    ebs: ebs::EbsState,
    bodies: Mutex<Vec<(String, String)>>,
}

/// The AWS protocol, ready for [`crate::core::proxy::serve`].
pub fn aws() -> Arc<dyn Protocol> {
    Arc::new(AwsProtocol::default())
}

impl AwsProtocol {
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
}

#[async_trait::async_trait]
impl Protocol for AwsProtocol {
    fn classify(&self, headers: &HeaderMap, uri: &Uri, body: &[u8]) -> RequestInfo {
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

    fn error_answer(
        &self,
        info: &RequestInfo,
        kind: &FaultKind,
    ) -> Option<(StatusCode, &'static str, String)> {
        xml_error(&info.service, kind).map(|(status, body)| (status, "text/xml", body))
    }

    fn control_paths(&self) -> &'static [&'static str] {
        &[
            ECR_TOKEN_PATH,
            ebs::EBS_PATH,
            REQUEST_BODIES_PATH,
            crate::aws::lifecycle::ACTIONS_PATH,
            crate::aws::lifecycle::NOTIFY_PATH,
        ]
    }

    async fn control(
        &self,
        method: &Method,
        path: &str,
        body: &Bytes,
        upstream: &Upstream,
    ) -> Option<Response<ProxyBody>> {
        match (method, path) {
            (&Method::GET, crate::aws::lifecycle::ACTIONS_PATH) => {
                let calls = self.lifecycle.calls();
                return Some(json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&calls).unwrap_or_default(),
                ));
            }
            (&Method::GET, REQUEST_BODIES_PATH) => {
                let bodies = self
                    .bodies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                return Some(json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&bodies).unwrap_or_default(),
                ));
            }
            (&Method::POST, crate::aws::lifecycle::NOTIFY_PATH) => {
                return Some(lifecycle_notify(body, upstream).await);
            }
            (&Method::POST, ECR_TOKEN_PATH) => {}
            (_, ebs::EBS_PATH) => return self.ebs.control(method, body),
            _ => return None,
        }
        Some(match serde_json::from_slice::<EcrToken>(body) {
            Ok(token) => {
                *self
                    .ecr_token_lifetime
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = token.lifetime_seconds;
                json_response(StatusCode::OK, b"{}".to_vec())
            }
            Err(e) => error_response(StatusCode::BAD_REQUEST, &format!("ecr token: {e}")),
        })
    }

    async fn exchange(
        &self,
        info: &RequestInfo,
        parts: http::request::Parts,
        body: Bytes,
        upstream: &Upstream,
    ) -> Response<ProxyBody> {
        if RECORDED_BODIES.contains(&info.key().as_str()) {
            let form = String::from_utf8_lossy(&body).into_owned();
            self.bodies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((info.key(), form));
        }
        if info.service == "ecr-public" && info.action == "GetAuthorizationToken" {
            return ecr_public_token(self.ecr_token_expiry());
        }
        if info.service == "ec2" && info.action == "DescribeInstanceTopology" {
            return topology::answer(&parts, &body, upstream).await;
        }
        if info.service == "ec2" && self.ebs.handles(&info.action) {
            return self.ebs.exchange(&info.action, parts, body, upstream).await;
        }
        if info.service == "ec2" && info.action == "DescribeInstanceTypes" {
            if let Some(page) = self
                .paged
                .describe_instance_types(&parts, &body, upstream)
                .await
            {
                return page;
            }
        }
        if crate::aws::lifecycle::INTERCEPTED.contains(&info.key().as_str()) {
            let form = std::str::from_utf8(&body).unwrap_or_default();
            let (status, xml) = self.lifecycle.answer(&info.action, form);
            let mut response = Response::new(full(xml.into_bytes()));
            *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
            return response;
        }
        let response = upstream.forward(parts, body).await;
        match self.ecr_token_expiry() {
            Some(expires_at) if info.key() == "ecr:GetAuthorizationToken" => {
                with_ecr_expiry(response, expires_at).await
            }
            _ => response,
        }
    }
}

/// Puts an ASG lifecycle hook notification to moto's EventBridge (see [`crate::aws::lifecycle`]);
/// answers the action's token.
async fn lifecycle_notify(body: &Bytes, upstream: &Upstream) -> Response<ProxyBody> {
    let notify = match serde_json::from_slice::<crate::aws::lifecycle::Notify>(body) {
        Ok(n) => n,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &format!("notify: {e}")),
    };
    let (events, token) = crate::aws::lifecycle::put_events_body(&notify);
    let (mut parts, ()) = http::Request::post("/")
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
    let response = upstream.forward(parts, Bytes::from(events)).await;
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

/// An injected error answer: status and XML body in the service's protocol (EC2's query
/// protocol errors, or the awsquery `ErrorResponse` of the load-balancing APIs).
fn xml_error(service: &str, kind: &FaultKind) -> Option<(StatusCode, String)> {
    let (status, code, message) = match kind {
        FaultKind::Throttle if service == "ec2" => {
            (503, "RequestLimitExceeded", "Request limit exceeded.")
        }
        FaultKind::Throttle => (400, "Throttling", "Rate exceeded"),
        FaultKind::ServerError { status: 500 } => (500, "InternalError", "injected server error"),
        FaultKind::ServerError { status } => (*status, "ServiceUnavailable", "injected outage"),
        FaultKind::AuthFailure if service == "ec2" => (
            401,
            "AuthFailure",
            "AWS was not able to validate the provided access credentials",
        ),
        FaultKind::AuthFailure => (
            403,
            "InvalidClientTokenId",
            "The security token included in the request is invalid.",
        ),
        FaultKind::Latency { .. } | FaultKind::Drop => return None,
    };
    let body = if service == "ec2" {
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>stratus-fault</RequestID></Response>")
    } else {
        let kind = if status >= 500 { "Receiver" } else { "Sender" };
        format!("<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>stratus-fault</RequestId></ErrorResponse>")
    };
    Some((StatusCode::from_u16(status).ok()?, body))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::proxy::{error_response, json_response};

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
        let info = AwsProtocol::default().classify(
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
            AwsProtocol::default().classify(&h, &uri, b"").key(),
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
        let info =
            AwsProtocol::default().classify(&h, &"/".parse().unwrap(), b"{\"Action\":\"nope\"}");
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
        let info = AwsProtocol::default().classify(
            &HeaderMap::new(),
            &"/bucket/key".parse().unwrap(),
            b"",
        );
        assert_eq!(info.key(), "unknown:unknown");
    }
    #[test]
    fn error_answers_speak_each_protocol() {
        let (status, body) = xml_error("ec2", &FaultKind::Throttle).unwrap();
        assert_eq!(status, 503);
        assert!(body.contains("<Code>RequestLimitExceeded</Code>"), "{body}");
        assert!(body.contains("<Response><Errors>"));
        let (status, body) = xml_error("elasticloadbalancing", &FaultKind::Throttle).unwrap();
        assert_eq!(status, 400);
        assert!(body.starts_with("<ErrorResponse>") && body.contains("<Code>Throttling</Code>"));
        let (status, body) = xml_error("ec2", &FaultKind::ServerError { status: 503 }).unwrap();
        assert_eq!(status, 503);
        assert!(body.contains("ServiceUnavailable"));
        assert!(xml_error("ec2", &FaultKind::Drop).is_none());
    }
}
