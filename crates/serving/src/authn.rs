//! Delegated authentication: the bearer token of a request is checked by the Kubernetes API
//! server (`authentication.k8s.io/v1` TokenReview); answers are remembered briefly, keyed by the
//! token's SHA-256 (the token itself is neither kept nor logged).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::api::PostParams;
use kube::Api;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::ttl_cache::TtlCache;

/// An authenticated user, as the API server names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct User {
    /// User name.
    pub name: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Most answers remembered at once.
pub const CACHE_CAPACITY: usize = 4096;
/// Most reviews in flight at once: a burst of requests waits instead of fanning out.
pub const CONCURRENT_REVIEWS: usize = 4;
/// How long one review may take.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

/// The user a TokenReview status names, if it authenticated one.
pub fn user_from_status(status: Option<&TokenReviewStatus>) -> Option<User> {
    let status = status?;
    if status.authenticated != Some(true) {
        return None;
    }
    let info = status.user.as_ref()?;
    let name = info.username.clone().filter(|n| !n.is_empty())?;
    Some(User {
        name,
        uid: info.uid.clone().unwrap_or_default(),
        groups: info.groups.clone().unwrap_or_default(),
        extra: info.extra.clone().unwrap_or_default(),
    })
}

type TokenHash = [u8; 32];

/// Checks bearer tokens with TokenReviews.
pub struct TokenAuthenticator {
    api: Api<TokenReview>,
    ttl: Duration,
    cache: Mutex<TtlCache<TokenHash, Option<User>>>,
    slots: Semaphore,
}

impl TokenAuthenticator {
    /// Reviews through `client`; answers (either way) are remembered for `ttl` (0: not at all).
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        Self {
            api: Api::all(client),
            ttl,
            cache: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            slots: Semaphore::new(CONCURRENT_REVIEWS),
        }
    }

    /// The user behind `token`; `Ok(None)` when the API server does not accept it. Errors (API
    /// server unreachable, review forbidden) are not remembered.
    pub async fn authenticate(&self, token: &str) -> anyhow::Result<Option<User>> {
        let key: TokenHash = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = self.cached(&key) {
            return Ok(answer);
        }
        let _slot = self.slots.acquire().await.context("authenticator closed")?;
        // Another request may have asked while this one waited for a slot.
        if let Some(answer) = self.cached(&key) {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let created = tokio::time::timeout(
            REVIEW_TIMEOUT,
            self.api.create(&PostParams::default(), &review),
        )
        .await
        .context("TokenReview: no answer in time")?
        .context("TokenReview")?;
        let user = user_from_status(created.status.as_ref());
        if user.is_none() {
            if let Some(error) = created.status.as_ref().and_then(|s| s.error.as_deref()) {
                tracing::debug!(error, "token not accepted");
            }
        }
        self.lock()
            .insert(key, user.clone(), self.ttl, Instant::now());
        Ok(user)
    }

    fn cached(&self, key: &TokenHash) -> Option<Option<User>> {
        self.lock().get(key, Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TtlCache<TokenHash, Option<User>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;

    fn headers(value: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwYXNz")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer a b")), None);
        assert_eq!(bearer_token(&http::HeaderMap::new()), None);
    }

    #[test]
    fn users_from_review_statuses() {
        let info = UserInfo {
            username: Some("jane".into()),
            uid: Some("42".into()),
            groups: Some(vec!["system:authenticated".into()]),
            extra: None,
        };
        let status = |authenticated, user: Option<UserInfo>| TokenReviewStatus {
            authenticated,
            user,
            ..TokenReviewStatus::default()
        };
        let jane = user_from_status(Some(&status(Some(true), Some(info.clone())))).unwrap();
        assert_eq!(jane.name, "jane");
        assert_eq!(jane.uid, "42");
        assert_eq!(jane.groups, vec!["system:authenticated".to_string()]);
        assert_eq!(
            user_from_status(Some(&status(Some(false), Some(info)))),
            None
        );
        assert_eq!(user_from_status(Some(&status(None, None))), None);
        let nameless = UserInfo::default();
        assert_eq!(
            user_from_status(Some(&status(Some(true), Some(nameless)))),
            None
        );
        assert_eq!(user_from_status(None), None);
    }
}
