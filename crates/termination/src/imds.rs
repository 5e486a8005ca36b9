//! EC2 instance metadata client: IMDSv2 session tokens (refreshed before their TTL runs out,
//! dropped on a 401) with a fallback to IMDSv1, retries per `--metadata-tries`, a 2 s timeout
//! per request, and typed readers for the paths the monitors poll.

use std::time::Duration;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

const SPOT_INSTANCE_ACTION_PATH: &str = "/latest/meta-data/spot/instance-action";
const ASG_TARGET_LIFECYCLE_STATE_PATH: &str =
    "/latest/meta-data/autoscaling/target-lifecycle-state";
const SCHEDULED_EVENTS_PATH: &str = "/latest/meta-data/events/maintenance/scheduled";
const REBALANCE_RECOMMENDATION_PATH: &str = "/latest/meta-data/events/recommendations/rebalance";
const IDENTITY_DOCUMENT_PATH: &str = "/latest/dynamic/instance-identity/document";
const TOKEN_PATH: &str = "/latest/api/token";
const TOKEN_TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";
const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";

/// Upstream's IMDSv2 token lifetime.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// A token is refreshed this long before it expires (upstream: 15 s).
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(15);
/// After a failed token request, IMDSv1 is used for this long before trying v2 again (upstream
/// retries the token on every request, doubling the requests on v1-only hosts).
const V1_FALLBACK_PERIOD: Duration = Duration::from_secs(60);
/// Per-request timeout (upstream: 2 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Why an IMDS read failed.
#[derive(Debug, thiserror::Error)]
pub enum ImdsError {
    /// No HTTP answer after `--metadata-tries` attempts (connect error or 2 s timeout).
    #[error("IMDS request {path} failed: {message}")]
    Transport {
        /// The IMDS path asked for.
        path: String,
        /// The last attempt's error, with its causes.
        message: String,
    },
    /// An unsuccessful HTTP status (a 404 is no error where absence is allowed).
    #[error("IMDS {path} answered HTTP {status}")]
    Status {
        /// The IMDS path asked for.
        path: String,
        /// The HTTP status code.
        status: u16,
    },
    /// The body is not the expected JSON.
    #[error("IMDS {path}: could not decode the answer: {message}")]
    Decode {
        /// The IMDS path asked for.
        path: String,
        /// The JSON error.
        message: String,
    },
}

impl ImdsError {
    /// A short, bounded category for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            ImdsError::Transport { .. } => "transport",
            ImdsError::Status { .. } => "status",
            ImdsError::Decode { .. } => "decode",
        }
    }
}

/// `/spot/instance-action`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstanceAction {
    /// `terminate`, `stop` or `hibernate`.
    pub action: String,
    /// When the action happens, RFC 3339 (e.g. `2026-01-01T00:00:00Z`).
    pub time: String,
}

/// One entry of `/events/maintenance/scheduled`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ScheduledEventDetail {
    /// `NotBefore`: the window's start, e.g. `21 Jan 2019 09:00:43 GMT`.
    #[serde(rename = "NotBefore", default)]
    pub not_before: String,
    /// `Code`: `instance-reboot`, `system-reboot`, `system-maintenance`, `instance-retirement`
    /// or `instance-stop`.
    #[serde(rename = "Code", default)]
    pub code: String,
    /// `Description`: AWS's text.
    #[serde(rename = "Description", default)]
    pub description: String,
    /// `EventId`: `instance-event-<hex>`.
    #[serde(rename = "EventId", default)]
    pub event_id: String,
    /// `NotAfter`: the window's end (same layout as `not_before`).
    #[serde(rename = "NotAfter", default)]
    pub not_after: String,
    /// `State`: `active`, `canceled` or `completed`.
    #[serde(rename = "State", default)]
    pub state: String,
}

/// `/events/recommendations/rebalance`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RebalanceRecommendation {
    /// `noticeTime`: when the recommendation was issued, RFC 3339.
    #[serde(rename = "noticeTime")]
    pub notice_time: String,
}

/// Facts about this instance (webhook template fields, Event annotations).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodeMetadata {
    /// The AWS account id (identity document `accountId`).
    #[serde(rename = "accountId", default)]
    pub account_id: String,
    /// The instance id (`instanceId`, else `meta-data/instance-id`).
    #[serde(rename = "instanceId", default)]
    pub instance_id: String,
    /// `meta-data/instance-life-cycle`: e.g. `spot` or `on-demand`.
    #[serde(skip)]
    pub instance_life_cycle: String,
    /// The instance type (`instanceType`, else `meta-data/instance-type`).
    #[serde(rename = "instanceType", default)]
    pub instance_type: String,
    /// `meta-data/public-hostname` (empty without a public address).
    #[serde(skip)]
    pub public_hostname: String,
    /// `meta-data/public-ipv4` (empty without a public address).
    #[serde(skip)]
    pub public_ip: String,
    /// `meta-data/local-hostname`.
    #[serde(skip)]
    pub local_hostname: String,
    /// The private IPv4 address (`privateIp`, else `meta-data/local-ipv4`).
    #[serde(rename = "privateIp", default)]
    pub local_ip: String,
    /// The availability zone (`availabilityZone`, else `meta-data/placement/availability-zone`).
    #[serde(rename = "availabilityZone", default)]
    pub availability_zone: String,
    /// The region (identity document `region`, else the zone without its letter).
    #[serde(default)]
    pub region: String,
}

struct Token {
    value: String,
    refresh_at: Instant,
}

enum TokenState {
    None,
    V2(Token),
    /// IMDSv2 unavailable; v1 until this time.
    V1Until(Instant),
}

/// An IMDS client; cheap to share behind an `Arc`.
pub struct Imds {
    base: String,
    tries: u32,
    token_ttl: Duration,
    client: Client<HttpConnector, Empty<Bytes>>,
    token: Mutex<TokenState>,
}

impl Imds {
    /// A client for `base` (e.g. `http://169.254.169.254`), trying each request `tries` times.
    pub fn new(base: &str, tries: u32) -> Imds {
        Imds::with_token_ttl(base, tries, DEFAULT_TOKEN_TTL)
    }

    /// As [`Imds::new`] with another IMDSv2 token lifetime (tests).
    pub fn with_token_ttl(base: &str, tries: u32, token_ttl: Duration) -> Imds {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(REQUEST_TIMEOUT));
        Imds {
            base: base.trim_end_matches('/').to_owned(),
            tries: tries.max(1),
            token_ttl,
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .pool_max_idle_per_host(2)
                .build(connector),
            token: Mutex::new(TokenState::None),
        }
    }

    /// Whether the last requests used an IMDSv2 token.
    pub async fn uses_v2(&self) -> bool {
        matches!(*self.token.lock().await, TokenState::V2(_))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, http::HeaderMap, Bytes), String> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let request = builder.body(Empty::new()).map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| describe(&e))?;
        let (parts, body) = response.into_parts();
        let body = tokio::time::timeout(REQUEST_TIMEOUT, body.collect())
            .await
            .map_err(|_| "body not read in time".to_string())?
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((parts.status, parts.headers, body))
    }

    /// The token to send, fetching or refreshing it when due.
    async fn token(&self) -> Option<String> {
        let mut state = self.token.lock().await;
        let now = Instant::now();
        match &*state {
            TokenState::V2(t) if now < t.refresh_at => return Some(t.value.clone()),
            TokenState::V1Until(until) if now < *until => return None,
            _ => {}
        }
        let ttl = self.token_ttl.as_secs().to_string();
        match self
            .send(Method::PUT, TOKEN_PATH, &[(TOKEN_TTL_HEADER, &ttl)])
            .await
        {
            Ok((status, headers, body)) if status.is_success() => {
                let granted = headers
                    .get(TOKEN_TTL_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .map_or(self.token_ttl, Duration::from_secs);
                let value = String::from_utf8_lossy(&body).trim().to_owned();
                tracing::debug!(ttl_seconds = granted.as_secs(), "got an IMDSv2 token");
                *state = TokenState::V2(Token {
                    value: value.clone(),
                    refresh_at: now + granted.saturating_sub(REFRESH_BEFORE_EXPIRY),
                });
                Some(value)
            }
            other => {
                let why = match other {
                    Ok((status, _, _)) => format!("HTTP {status}"),
                    Err(e) => e,
                };
                tracing::debug!(error = %why, "no IMDSv2 token, continuing with IMDSv1");
                *state = TokenState::V1Until(now + V1_FALLBACK_PERIOD);
                None
            }
        }
    }

    async fn forget_token(&self) {
        *self.token.lock().await = TokenState::None;
    }

    /// GETs `path`: `Ok((status, body))` for any HTTP answer. Transport failures are retried
    /// `tries` times (2 s apart, growing); a 401 drops the token and asks again once.
    pub async fn get(&self, path: &str) -> Result<(StatusCode, Bytes), ImdsError> {
        for attempt in 0..2 {
            let token = self.token().await;
            let headers: Vec<(&str, &str)> = token
                .as_deref()
                .map(|t| vec![(TOKEN_HEADER, t)])
                .unwrap_or_default();
            let mut delay = Duration::from_secs(2);
            let mut result = Err(String::new());
            for try_number in 0..self.tries {
                result = self.send(Method::GET, path, &headers).await;
                if result.is_ok() || try_number + 1 == self.tries {
                    break;
                }
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            let (status, _, body) = result.map_err(|message| ImdsError::Transport {
                path: path.to_owned(),
                message,
            })?;
            if status == StatusCode::UNAUTHORIZED && attempt == 0 {
                self.forget_token().await;
                continue;
            }
            return Ok((status, body));
        }
        unreachable!("the loop returns on its second attempt")
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        missing_ok: bool,
    ) -> Result<Option<T>, ImdsError> {
        let (status, body) = self.get(path).await?;
        if status == StatusCode::NOT_FOUND && missing_ok {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(ImdsError::Status {
                path: path.to_owned(),
                status: status.as_u16(),
            });
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| ImdsError::Decode {
                path: path.to_owned(),
                message: stratus_runtime::redact::json(&e),
            })
    }

    async fn get_text(&self, path: &str, missing_ok: bool) -> Result<String, ImdsError> {
        let (status, body) = self.get(path).await?;
        if status == StatusCode::NOT_FOUND && missing_ok {
            return Ok(String::new());
        }
        if !status.is_success() {
            return Err(ImdsError::Status {
                path: path.to_owned(),
                status: status.as_u16(),
            });
        }
        Ok(String::from_utf8_lossy(&body).trim().to_owned())
    }

    /// The Spot interruption notice, if any (404 means none).
    pub async fn spot_action(&self) -> Result<Option<InstanceAction>, ImdsError> {
        self.get_json(SPOT_INSTANCE_ACTION_PATH, true).await
    }

    /// The scheduled maintenance events.
    pub async fn scheduled_events(&self) -> Result<Vec<ScheduledEventDetail>, ImdsError> {
        Ok(self
            .get_json(SCHEDULED_EVENTS_PATH, true)
            .await?
            .unwrap_or_default())
    }

    /// The rebalance recommendation, if any (404 means none).
    pub async fn rebalance_recommendation(
        &self,
    ) -> Result<Option<RebalanceRecommendation>, ImdsError> {
        self.get_json(REBALANCE_RECOMMENDATION_PATH, true).await
    }

    /// The ASG target lifecycle state (empty without a lifecycle hook).
    pub async fn asg_target_lifecycle_state(&self) -> Result<String, ImdsError> {
        self.get_text(ASG_TARGET_LIFECYCLE_STATE_PATH, true).await
    }

    /// This instance's facts: the identity document, then the paths it lacks. Missing pieces
    /// stay empty (logged), as upstream.
    pub async fn node_metadata(&self) -> NodeMetadata {
        let mut metadata = match self
            .get_json::<NodeMetadata>(IDENTITY_DOCUMENT_PATH, false)
            .await
        {
            Ok(Some(doc)) => doc,
            Ok(None) | Err(_) => {
                let mut m = NodeMetadata {
                    instance_id: self
                        .get_text("/latest/meta-data/instance-id", false)
                        .await
                        .unwrap_or_default(),
                    instance_type: self
                        .get_text("/latest/meta-data/instance-type", false)
                        .await
                        .unwrap_or_default(),
                    local_ip: self
                        .get_text("/latest/meta-data/local-ipv4", false)
                        .await
                        .unwrap_or_default(),
                    availability_zone: self
                        .get_text("/latest/meta-data/placement/availability-zone", false)
                        .await
                        .unwrap_or_default(),
                    ..NodeMetadata::default()
                };
                if m.availability_zone.len() > 1 {
                    m.region = m.availability_zone[..m.availability_zone.len() - 1].to_owned();
                }
                m
            }
        };
        metadata.instance_life_cycle = self
            .get_text("/latest/meta-data/instance-life-cycle", false)
            .await
            .unwrap_or_default();
        metadata.local_hostname = self
            .get_text("/latest/meta-data/local-hostname", false)
            .await
            .unwrap_or_default();
        metadata.public_hostname = self
            .get_text("/latest/meta-data/public-hostname", true)
            .await
            .unwrap_or_default();
        metadata.public_ip = self
            .get_text("/latest/meta-data/public-ipv4", true)
            .await
            .unwrap_or_default();
        tracing::info!(instance_id = %metadata.instance_id, instance_type = %metadata.instance_type,
            availability_zone = %metadata.availability_zone, "instance metadata retrieved");
        metadata
    }
}

fn describe(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
