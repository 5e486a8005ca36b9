//! One Keystone session shared by every controller: a token scoped to the project, renewed at
//! 80 % of its lifetime (measured on our clock from when it arrived, so clock skew does not
//! matter) and at once after a 401; concurrent callers wait for the one re-authentication.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Method};
use stratus_cloud::CloudError;
use stratus_cloud_kit::CallGuard;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::catalog::{Catalog, Service};
use super::errors::{check, classify};
use super::http::HttpClient;
use super::keystone::{auth_request, parse_token};
use crate::config::{Credentials, Interface};

/// A valid token and what came with it.
#[derive(Debug)]
pub struct Auth {
    /// The `X-Auth-Token` header value (sensitive: never printed).
    pub token: HeaderValue,
    /// The service catalog.
    pub catalog: Catalog,
    /// The project the token is scoped to.
    pub project_id: Option<String>,
    renew_at: Instant,
}

/// The session.
pub struct Session {
    http: HttpClient,
    tokens_url: String,
    credentials: Credentials,
    interface: Interface,
    region: Option<String>,
    identity: CallGuard,
    current: Mutex<Option<Arc<Auth>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("tokens_url", &self.tokens_url)
            .field("interface", &self.interface)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// `POST` here for a token: `<auth-url>/auth/tokens`, `/v3` added when the URL names no version.
pub fn tokens_url(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

/// When to renew a token valid for `lifetime`: at 80 % of it, not sooner than 1 s.
pub fn renew_after(lifetime: Duration) -> Duration {
    (lifetime * 4 / 5).max(Duration::from_secs(1))
}

impl Session {
    /// A session for `credentials` at `auth_url`; no request is made until first use.
    pub fn new(
        http: HttpClient,
        auth_url: &str,
        credentials: Credentials,
        interface: Interface,
        region: Option<String>,
        identity: CallGuard,
    ) -> Session {
        Session {
            http,
            tokens_url: tokens_url(auth_url),
            credentials,
            interface,
            region,
            identity,
            current: Mutex::new(None),
        }
    }

    /// The HTTP client (shared by every service).
    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// A valid token, authenticating first when there is none or it is due for renewal.
    pub async fn auth(&self) -> Result<Arc<Auth>, CloudError> {
        let mut current = self.current.lock().await;
        if let Some(a) = current.as_ref() {
            if Instant::now() < a.renew_at {
                return Ok(a.clone());
            }
        }
        let fresh = Arc::new(self.authenticate().await?);
        *current = Some(fresh.clone());
        Ok(fresh)
    }

    /// Forgets `stale` (the cloud answered 401 to it); the next caller authenticates again.
    pub async fn invalidate(&self, stale: &Arc<Auth>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|a| Arc::ptr_eq(a, stale)) {
            *current = None;
        }
    }

    /// The base URL of `service` for `auth`'s catalog.
    pub fn endpoint(&self, auth: &Auth, service: Service) -> Result<String, CloudError> {
        auth.catalog
            .endpoint(service, self.interface, self.region.as_deref())
            .map_err(|e| CloudError::InvalidInput(e.to_string()))
    }

    async fn authenticate(&self) -> Result<Auth, CloudError> {
        let body = serde_json::to_vec(&auth_request(&self.credentials))
            .map_err(|e| CloudError::InvalidInput(format!("token request: {e}")))?;
        let started = Instant::now();
        let response = self
            .identity
            .call(
                "CreateToken",
                || {
                    let body = body.clone();
                    async move {
                        check(
                            self.http
                                .send(Method::POST, &self.tokens_url, &[], Some(body))
                                .await,
                        )
                    }
                },
                classify,
            )
            .await?;
        let subject = response
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok());
        let token =
            parse_token(subject, &response.body, time::OffsetDateTime::now_utc()).map_err(|e| {
                CloudError::Unavailable {
                    operation: "CreateToken".into(),
                    message: e.to_string(),
                }
            })?;
        let mut header =
            HeaderValue::from_str(token.id.expose()).map_err(|_| CloudError::Unavailable {
                operation: "CreateToken".into(),
                message: "Keystone issued a token that is not a valid header value".into(),
            })?;
        header.set_sensitive(true);
        tracing::debug!(
            lifetime_s = token.lifetime.as_secs(),
            project = token.project_id.as_deref().unwrap_or(""),
            "authenticated with Keystone"
        );
        Ok(Auth {
            token: header,
            catalog: token.catalog,
            project_id: token.project_id,
            renew_at: started + renew_after(token.lifetime),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_urls_and_renewal() {
        assert_eq!(
            tokens_url("http://k:5000/v3"),
            "http://k:5000/v3/auth/tokens"
        );
        assert_eq!(
            tokens_url("http://k:5000/v3/"),
            "http://k:5000/v3/auth/tokens"
        );
        assert_eq!(tokens_url("http://k:5000"), "http://k:5000/v3/auth/tokens");
        assert_eq!(
            renew_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(renew_after(Duration::from_secs(5)), Duration::from_secs(4));
        assert_eq!(renew_after(Duration::ZERO), Duration::from_secs(1));
    }
}
