//! Keystone v3 token requests and answers, pure: the request body for the configured credentials,
//! and the token, lifetime, project and catalog read from the answer.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::{Credentials, Named, Secret};

use super::catalog::{Catalog, CatalogEntry};

fn named(n: &Named) -> Value {
    match n {
        Named::Id(id) => json!({"id": id}),
        Named::Name(name) => json!({"name": name}),
    }
}

fn with_domain(who: &Named, domain: &Option<Named>) -> Value {
    let mut v = named(who);
    if let (Named::Name(_), Some(d)) = (who, domain) {
        v["domain"] = named(d);
    }
    v
}

/// The body of `POST /v3/auth/tokens` for `credentials`.
pub fn auth_request(credentials: &Credentials) -> Value {
    match credentials {
        Credentials::Password {
            user,
            user_domain,
            password,
            project,
            project_domain,
        } => {
            let mut u = with_domain(user, user_domain);
            u["password"] = json!(password.expose());
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": u}},
                "scope": {"project": with_domain(project, project_domain)},
            }})
        }
        Credentials::ApplicationCredential {
            credential,
            user,
            user_domain,
            secret,
        } => {
            let mut c = named(credential);
            if let (Named::Name(_), Some(u)) = (credential, user) {
                c["user"] = with_domain(u, user_domain);
            }
            c["secret"] = json!(secret.expose());
            json!({"auth": {"identity": {
                "methods": ["application_credential"],
                "application_credential": c,
            }}})
        }
    }
}

/// An issued token.
#[derive(Debug, Clone)]
pub struct Token {
    /// The token (`X-Subject-Token`).
    pub id: Secret,
    /// How long it is valid from issue (`expires_at - issued_at`, both Keystone's clock).
    pub lifetime: Duration,
    /// The project it is scoped to.
    pub project_id: Option<String>,
    /// The service catalog.
    pub catalog: Catalog,
}

/// Why a token answer is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No `X-Subject-Token` header.
    #[error("Keystone answered without an X-Subject-Token header")]
    NoToken,
    /// The body is not a token.
    #[error("Keystone's token answer does not parse: {0}")]
    Body(String),
}

#[derive(Deserialize)]
struct Answer {
    token: TokenBody,
}

#[derive(Deserialize)]
struct TokenBody {
    expires_at: String,
    issued_at: Option<String>,
    project: Option<Project>,
    #[serde(default)]
    catalog: Vec<CatalogEntry>,
}

#[derive(Deserialize)]
struct Project {
    id: String,
}

fn timestamp(text: &str) -> Result<time::OffsetDateTime, TokenError> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| TokenError::Body(format!("timestamp {text:?}: {e}")))
}

/// Reads a token answer. Without `issued_at`, the lifetime runs from `now`.
pub fn parse_token(
    subject_token: Option<&str>,
    body: &[u8],
    now: time::OffsetDateTime,
) -> Result<Token, TokenError> {
    let id = subject_token
        .filter(|t| !t.is_empty())
        .ok_or(TokenError::NoToken)?;
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| TokenError::Body(stratus_runtime::redact::json(&e)))?;
    let expires = timestamp(&answer.token.expires_at)?;
    let issued = match &answer.token.issued_at {
        Some(t) => timestamp(t)?,
        None => now,
    };
    let lifetime = Duration::try_from(expires - issued).unwrap_or(Duration::ZERO);
    Ok(Token {
        id: Secret::new(id),
        lifetime,
        project_id: answer.token.project.map(|p| p.id),
        catalog: Catalog(answer.token.catalog),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_requests_scope_to_the_project() {
        let c = Credentials::Password {
            user: Named::Name("ccm".into()),
            user_domain: Some(Named::Name("Default".into())),
            password: Secret::new("pw"),
            project: Named::Id("p-1".into()),
            project_domain: Some(Named::Name("Default".into())),
        };
        assert_eq!(
            auth_request(&c),
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {"name": "ccm", "domain": {"name": "Default"}, "password": "pw"}}},
                "scope": {"project": {"id": "p-1"}},
            }})
        );
    }

    #[test]
    fn application_credentials_carry_their_user_when_named() {
        let c = Credentials::ApplicationCredential {
            credential: Named::Name("ccm-cred".into()),
            user: Some(Named::Id("u-1".into())),
            user_domain: None,
            secret: Secret::new("s"),
        };
        assert_eq!(
            auth_request(&c)["auth"]["identity"]["application_credential"],
            json!({"name": "ccm-cred", "user": {"id": "u-1"}, "secret": "s"})
        );
    }

    #[test]
    fn token_answers_give_lifetime_project_and_catalog() {
        let body = br#"{"token": {"expires_at": "2026-11-23T02:00:00.000000Z", "issued_at": "2026-11-23T01:00:00.000000Z",
            "project": {"id": "p-1", "name": "k8s"},
            "catalog": [{"type": "compute", "name": "nova", "endpoints": [{"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://127.0.0.1:1/compute/v2.1"}]}]}}"#;
        let now = time::OffsetDateTime::UNIX_EPOCH;
        let t = parse_token(Some("tok"), body, now).unwrap();
        assert_eq!(t.id.expose(), "tok");
        assert_eq!(t.lifetime, Duration::from_secs(3600));
        assert_eq!(t.project_id.as_deref(), Some("p-1"));
        assert_eq!(t.catalog.0.len(), 1);
        assert!(matches!(
            parse_token(None, body, now),
            Err(TokenError::NoToken)
        ));
        assert!(matches!(
            parse_token(Some("t"), b"{}", now),
            Err(TokenError::Body(_))
        ));
    }
}
