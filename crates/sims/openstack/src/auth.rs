//! Token validation: every API request carries `X-Auth-Token`, checked against the real Keystone
//! (`GET /v3/auth/tokens?nocatalog` with the simulators' own service token, as
//! keystonemiddleware does) and cached briefly, never past the token's `expires_at`. An invalid
//! or expired token gets Keystone's 401 body and a `WWW-Authenticate` header.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::time::Instant;

/// Who made a request, as Keystone reports the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's project (resources are scoped to it).
    pub project_id: String,
    /// The token's user.
    pub user_id: String,
    /// Whether the token carries the `admin` role.
    pub is_admin: bool,
}

/// The password credentials the simulators validate tokens with (an admin of the test cloud).
#[derive(Clone)]
pub struct ServiceCredentials {
    /// `http://127.0.0.1:PORT/identity/v3` (Keystone directly, not through the proxy).
    pub keystone_url: String,
    /// User name (Default domain).
    pub username: String,
    /// Password.
    pub password: String,
    /// Project name (Default domain).
    pub project_name: String,
}

impl std::fmt::Debug for ServiceCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCredentials")
            .field("keystone_url", &self.keystone_url)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("project_name", &self.project_name)
            .finish()
    }
}

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `X-Auth-Token` header.
    #[error("no X-Auth-Token")]
    Missing,
    /// Keystone does not know the token, or it expired.
    #[error("token invalid or expired")]
    Invalid,
    /// Keystone could not be asked.
    #[error("keystone unavailable: {0}")]
    Keystone(String),
}

/// How tokens are checked.
pub enum Auth {
    /// Against a real Keystone.
    Keystone(Box<KeystoneValidator>),
    /// A fixed table (the simulator's own handler tests, which run without Keystone).
    Fixed(HashMap<String, Caller>),
}

impl Auth {
    /// The caller a token stands for.
    pub async fn validate(&self, token: Option<&str>) -> Result<Caller, AuthError> {
        let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
        match self {
            Auth::Fixed(table) => table.get(token).cloned().ok_or(AuthError::Invalid),
            Auth::Keystone(keystone) => keystone.validate(token).await,
        }
    }
}

/// How long a validated token is trusted without asking Keystone again.
const CACHE_TTL: Duration = Duration::from_secs(10);

/// Validates tokens against Keystone, with a short cache.
pub struct KeystoneValidator {
    credentials: ServiceCredentials,
    client: Client<HttpConnector, Full<Bytes>>,
    service_token: tokio::sync::Mutex<Option<(String, SystemTime)>>,
    cache: Mutex<HashMap<String, (Caller, Instant)>>,
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenInfo,
}

#[derive(Deserialize)]
struct TokenInfo {
    expires_at: String,
    user: Named,
    project: Option<Named>,
    #[serde(default)]
    roles: Vec<Named>,
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
}

impl KeystoneValidator {
    /// A validator using `credentials` for its service token.
    pub fn new(credentials: ServiceCredentials) -> KeystoneValidator {
        KeystoneValidator {
            credentials,
            client: Client::builder(TokioExecutor::new()).build_http(),
            service_token: tokio::sync::Mutex::new(None),
            cache: Mutex::new(HashMap::new()),
        }
    }

    async fn validate(&self, token: &str) -> Result<Caller, AuthError> {
        let now = Instant::now();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            match cache.get(token) {
                Some((caller, until)) if *until > now => return Ok(caller.clone()),
                Some(_) => {
                    cache.remove(token);
                }
                None => {}
            }
            if cache.len() > 10_000 {
                cache.retain(|_, (_, until)| *until > now);
            }
        }
        for attempt in 0..2 {
            let service = self.service_token(attempt > 0).await?;
            let url = format!("{}/auth/tokens?nocatalog", self.credentials.keystone_url);
            let request = Request::builder()
                .method(Method::GET)
                .uri(&url)
                .header("x-auth-token", &service)
                .header("x-subject-token", token)
                .body(Full::new(Bytes::new()))
                .map_err(|e| AuthError::Keystone(e.to_string()))?;
            let (status, body) = self.exchange(request).await?;
            match status {
                StatusCode::OK => {
                    let info: TokenBody = serde_json::from_slice(&body)
                        .map_err(|e| AuthError::Keystone(format!("token body: {e}")))?;
                    let left = remaining(&info.token.expires_at)?;
                    let Some(project) = info.token.project else {
                        // Unscoped or domain-scoped tokens reach no project's resources.
                        return Err(AuthError::Invalid);
                    };
                    let caller = Caller {
                        project_id: project.id,
                        user_id: info.token.user.id,
                        is_admin: info.token.roles.iter().any(|r| r.name == "admin"),
                    };
                    let until = Instant::now() + left.min(CACHE_TTL);
                    self.cache
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(token.to_owned(), (caller.clone(), until));
                    return Ok(caller);
                }
                StatusCode::NOT_FOUND => return Err(AuthError::Invalid),
                // Our own service token was refused (expired): authenticate again, once.
                StatusCode::UNAUTHORIZED if attempt == 0 => continue,
                other => {
                    return Err(AuthError::Keystone(format!(
                        "validating a token: {other}: {}",
                        String::from_utf8_lossy(&body)
                    )))
                }
            }
        }
        Err(AuthError::Keystone(
            "keystone refused the simulators' fresh service token".into(),
        ))
    }

    /// The simulators' own token, renewed when `refresh` or within a second of expiry.
    async fn service_token(&self, refresh: bool) -> Result<String, AuthError> {
        let mut held = self.service_token.lock().await;
        if let Some((token, expires)) = held.as_ref() {
            let fresh = expires
                .duration_since(SystemTime::now())
                .is_ok_and(|left| left > Duration::from_secs(1));
            if fresh && !refresh {
                return Ok(token.clone());
            }
        }
        let c = &self.credentials;
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": c.username, "domain": {"id": "default"}, "password": c.password}}},
            "scope": {"project": {"name": c.project_name, "domain": {"id": "default"}}}
        }});
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/auth/tokens?nocatalog", c.keystone_url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| AuthError::Keystone(e.to_string()))?;
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .map_err(|_| AuthError::Keystone("no answer to the service login in 30 s".into()))?
            .map_err(|e| AuthError::Keystone(format!("service login: {e}")))?;
        let status = response.status();
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| AuthError::Keystone(e.to_string()))?
            .to_bytes();
        let (StatusCode::CREATED, Some(token)) = (status, token) else {
            return Err(AuthError::Keystone(format!(
                "service login answered {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        };
        let info: TokenBody = serde_json::from_slice(&body)
            .map_err(|e| AuthError::Keystone(format!("service token body: {e}")))?;
        let expires = SystemTime::now() + remaining(&info.token.expires_at)?;
        *held = Some((token.clone(), expires));
        Ok(token)
    }

    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), AuthError> {
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .map_err(|_| AuthError::Keystone("no answer from keystone in 30 s".into()))?
            .map_err(|e| AuthError::Keystone(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| AuthError::Keystone(e.to_string()))?
            .to_bytes();
        Ok((status, body))
    }
}

/// Time left until a Keystone `expires_at` (RFC 3339); zero if past.
fn remaining(expires_at: &str) -> Result<Duration, AuthError> {
    let expires =
        time::OffsetDateTime::parse(expires_at, &time::format_description::well_known::Rfc3339)
            .map_err(|e| AuthError::Keystone(format!("expires_at {expires_at:?}: {e}")))?;
    let left = expires - time::OffsetDateTime::now_utc();
    Ok(Duration::try_from(left).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_times_are_read_from_keystone_timestamps() {
        assert_eq!(
            remaining("2000-01-01T00:00:00.000000Z").unwrap(),
            Duration::ZERO
        );
        let left = remaining("2999-01-01T00:00:00.000000Z").unwrap();
        assert!(left > Duration::from_secs(3600 * 24 * 365), "{left:?}");
        assert!(remaining("tomorrow").is_err());
        let creds = ServiceCredentials {
            keystone_url: "http://x".into(),
            username: "admin".into(),
            password: "hunter2".into(),
            project_name: "admin".into(),
        };
        assert!(!format!("{creds:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn fixed_tables_answer_missing_and_invalid_tokens() {
        let caller = Caller {
            project_id: "p".into(),
            user_id: "u".into(),
            is_admin: false,
        };
        let auth = Auth::Fixed(HashMap::from([("t".to_owned(), caller.clone())]));
        assert_eq!(auth.validate(Some("t")).await, Ok(caller));
        assert_eq!(auth.validate(Some("x")).await, Err(AuthError::Invalid));
        assert_eq!(auth.validate(None).await, Err(AuthError::Missing));
        assert_eq!(auth.validate(Some("")).await, Err(AuthError::Missing));
    }
}
