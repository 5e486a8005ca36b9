//! The only part that talks to AWS: STS `AssumeRoleWithWebIdentity` (service-account flow),
//! then ECR or ECR Public `GetAuthorizationToken`, through the official SDK on a
//! current-thread runtime that exists only for a cache miss.
//!
//! Endpoints follow the registry host: its region, FIPS endpoints for `dkr.ecr-fips` hosts and
//! dual-stack endpoints for dual-stack hosts (an IPv6-only node can reach them), unless an
//! endpoint is configured (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_ECR`, ...), which wins.

use std::time::{Duration, SystemTime};

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ecr::config::Credentials;
use aws_sdk_ecr::error::{ProvideErrorMetadata, SdkError};
use base64::Engine as _;

use crate::app::{Token, TokenSource};
use crate::identity::Identity;
use crate::log::Log;
use crate::registry::Registry;
use crate::secret::Secret;

/// Session name of the assumed role (visible in CloudTrail).
pub const ROLE_SESSION_NAME: &str = "ecr-credential-provider";

/// Why no token came back.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The runtime for the AWS calls could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// `sts:AssumeRoleWithWebIdentity` failed.
    #[error("assuming role {role_arn} with the service account token (sts:AssumeRoleWithWebIdentity in {region}) failed: {message}")]
    AssumeRole {
        /// The role.
        role_arn: String,
        /// The region STS was called in.
        region: String,
        /// The SDK's message.
        message: String,
    },
    /// `GetAuthorizationToken` failed.
    #[error("{service}:GetAuthorizationToken in {region} failed: {message}")]
    GetToken {
        /// `ecr` or `ecr-public`.
        service: &'static str,
        /// The region called.
        region: String,
        /// The SDK's message.
        message: String,
    },
    /// The answer lacks a field.
    #[error("{service}:GetAuthorizationToken in {region} answered without {what}")]
    Incomplete {
        /// `ecr` or `ecr-public`.
        service: &'static str,
        /// The region called.
        region: String,
        /// The missing field.
        what: &'static str,
    },
    /// The answer's token is malformed.
    #[error("{service}:GetAuthorizationToken in {region} answered a token that is not {problem}")]
    BadToken {
        /// `ecr` or `ecr-public`.
        service: &'static str,
        /// The region called.
        region: String,
        /// How it is malformed.
        problem: TokenFormatError,
    },
}

impl FetchError {
    /// Short category for messages and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            FetchError::Runtime(_) => "Internal",
            FetchError::AssumeRole { .. } => "AssumeRoleFailed",
            FetchError::GetToken { .. } => "GetTokenFailed",
            FetchError::Incomplete { .. } | FetchError::BadToken { .. } => "BadAnswer",
        }
    }
}

/// How an authorization token can be malformed (never quoting it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenFormatError {
    /// Not base64.
    #[error("base64")]
    NotBase64,
    /// Not UTF-8 once decoded.
    #[error("UTF-8")]
    NotUtf8,
    /// No `:` between user and password.
    #[error("of the form user:password")]
    NoColon,
}

/// Decodes an ECR authorization token: base64 of `user:password` (split at the first colon).
pub fn decode_authorization_token(token: &str) -> Result<(String, Secret), TokenFormatError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| TokenFormatError::NotBase64)?;
    let text = String::from_utf8(bytes).map_err(|_| TokenFormatError::NotUtf8)?;
    let (user, password) = text.split_once(':').ok_or(TokenFormatError::NoColon)?;
    if user.is_empty() || password.is_empty() {
        return Err(TokenFormatError::NoColon);
    }
    Ok((user.to_owned(), Secret::new(password)))
}

/// Tokens from AWS through the SDK.
pub struct AwsTokenSource;

impl TokenSource for AwsTokenSource {
    fn fetch(
        &self,
        registry: &Registry,
        identity: &Identity,
        log: &mut Log,
    ) -> Result<Token, FetchError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(FetchError::Runtime)?;
        runtime.block_on(fetch(registry, identity, log))
    }
}

async fn fetch(
    registry: &Registry,
    identity: &Identity,
    log: &mut Log,
) -> Result<Token, FetchError> {
    let region = registry.region().to_owned();
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.clone()))
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_attempt_timeout(Duration::from_secs(10))
                .operation_timeout(Duration::from_secs(30))
                .build(),
        )
        .load()
        .await;
    let credentials = match identity {
        Identity::Node => {
            log.info(2, "using the node's AWS credentials");
            None
        }
        Identity::WebIdentity {
            role_arn, token, ..
        } => Some(assume_role(&sdk, registry, role_arn, token, log).await?),
    };
    let service = registry.service();
    log.info(
        2,
        format!("calling {service}:GetAuthorizationToken in {region}"),
    );
    let (raw, expires_at) = match registry {
        Registry::Private { .. } => {
            let mut conf = aws_sdk_ecr::config::Builder::from(&sdk);
            if let Some(credentials) = credentials {
                conf = conf.credentials_provider(credentials);
            }
            if !endpoint_configured(&sdk, "ECR") {
                if registry.fips() {
                    conf = conf.use_fips(true);
                }
                if registry.dual_stack() {
                    conf = conf.use_dual_stack(true);
                }
            }
            let answer = aws_sdk_ecr::Client::from_conf(conf.build())
                .get_authorization_token()
                .send()
                .await
                .map_err(|e| FetchError::GetToken {
                    service,
                    region: region.clone(),
                    message: describe(&e),
                })?;
            let data = answer.authorization_data().first();
            (
                data.and_then(|d| d.authorization_token())
                    .map(str::to_owned),
                data.and_then(|d| d.expires_at()).map(|t| t.secs()),
            )
        }
        Registry::Public { .. } => {
            let mut conf = aws_sdk_ecrpublic::config::Builder::from(&sdk);
            if let Some(credentials) = credentials {
                conf = conf.credentials_provider(credentials);
            }
            if registry.dual_stack() && !endpoint_configured(&sdk, "ECR_PUBLIC") {
                conf = conf.use_dual_stack(true);
            }
            let answer = aws_sdk_ecrpublic::Client::from_conf(conf.build())
                .get_authorization_token()
                .send()
                .await
                .map_err(|e| FetchError::GetToken {
                    service,
                    region: region.clone(),
                    message: describe(&e),
                })?;
            let data = answer.authorization_data();
            (
                data.and_then(|d| d.authorization_token())
                    .map(str::to_owned),
                data.and_then(|d| d.expires_at()).map(|t| t.secs()),
            )
        }
    };
    let raw = raw.ok_or_else(|| FetchError::Incomplete {
        service,
        region: region.clone(),
        what: "an authorization token",
    })?;
    log.add_secret_str(&raw);
    let (username, password) =
        decode_authorization_token(&raw).map_err(|problem| FetchError::BadToken {
            service,
            region,
            problem,
        })?;
    log.add_secret(&password);
    Ok(Token {
        username,
        password,
        expires_at,
    })
}

/// `AssumeRoleWithWebIdentity` (an unsigned call: the node needs no credentials of its own).
async fn assume_role(
    sdk: &SdkConfig,
    registry: &Registry,
    role_arn: &str,
    token: &Secret,
    log: &mut Log,
) -> Result<Credentials, FetchError> {
    let region = registry.region().to_owned();
    log.info(
        2,
        format!("assuming role {role_arn} with the service account token (sts in {region})"),
    );
    let mut conf = aws_sdk_sts::config::Builder::from(sdk);
    if !endpoint_configured(sdk, "STS") {
        if registry.fips() {
            conf = conf.use_fips(true);
        }
        if registry.dual_stack() {
            conf = conf.use_dual_stack(true);
        }
    }
    let failed = |message: String| FetchError::AssumeRole {
        role_arn: role_arn.to_owned(),
        region: region.clone(),
        message,
    };
    let answer = aws_sdk_sts::Client::from_conf(conf.build())
        .assume_role_with_web_identity()
        .role_arn(role_arn)
        .role_session_name(ROLE_SESSION_NAME)
        .web_identity_token(token.expose())
        .send()
        .await
        .map_err(|e| failed(describe(&e)))?;
    let credentials = answer
        .credentials()
        .ok_or_else(|| failed("the answer holds no credentials".into()))?;
    log.add_secret_str(credentials.secret_access_key());
    log.add_secret_str(credentials.session_token());
    Ok(Credentials::new(
        credentials.access_key_id(),
        credentials.secret_access_key(),
        Some(credentials.session_token().to_owned()),
        SystemTime::try_from(*credentials.expiration()).ok(),
        "AssumeRoleWithWebIdentity",
    ))
}

/// An SDK error in one line: the service's error code and message, or the chain of causes
/// (never the `Debug` form, which holds the raw HTTP exchange).
fn describe<E, R>(err: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match err {
        SdkError::ServiceError(context) => {
            let service_error = context.err();
            format!(
                "{}: {}",
                service_error.code().unwrap_or("unknown error"),
                service_error.message().unwrap_or("no message")
            )
        }
        other => causes(other),
    }
}

/// `error: cause: cause...`, leaving out causes already said and letting a cause that repeats
/// the one before it (`io error` then `io error: connection refused`) replace it.
fn causes(err: &dyn std::error::Error) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        source = cause.source();
        let part = cause.to_string();
        if parts.iter().any(|p| p.contains(&part)) {
            continue;
        }
        let last = parts.len() - 1;
        if last > 0 && part.contains(&parts[last]) {
            parts[last] = part;
        } else {
            parts.push(part);
        }
    }
    parts.join(": ")
}

/// Whether an endpoint URL is configured for the service (`AWS_ENDPOINT_URL_<SERVICE>`) or
/// for all (`AWS_ENDPOINT_URL`, profile `endpoint_url`); FIPS and dual-stack flags cannot be
/// combined with one.
fn endpoint_configured(sdk: &SdkConfig, service_env: &str) -> bool {
    let ignored = std::env::var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
    !ignored
        && (sdk.endpoint_url().is_some()
            || set("AWS_ENDPOINT_URL")
            || set(&format!("AWS_ENDPOINT_URL_{service_env}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_decode_at_the_first_colon() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let (user, password) = decode_authorization_token(&b64("AWS:pass:with:colons")).unwrap();
        assert_eq!(user, "AWS");
        assert_eq!(password.expose(), "pass:with:colons");
        let (user, password) =
            decode_authorization_token(&format!(" {}\n", b64("AWS:123456789012-auth-token")))
                .unwrap();
        assert_eq!(
            (user.as_str(), password.expose()),
            ("AWS", "123456789012-auth-token")
        );
    }

    #[test]
    fn errors_are_described_by_their_causes() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|l| l as _)
            }
        }
        let err = Layer(
            "dispatch failure",
            Some(Box::new(Layer(
                "io error",
                Some(Box::new(Layer(
                    "io error: connection refused",
                    Some(Box::new(Layer("connection refused", None))),
                ))),
            ))),
        );
        assert_eq!(
            causes(&err),
            "dispatch failure: io error: connection refused"
        );
    }

    #[test]
    fn malformed_tokens_are_named_without_quoting_them() {
        let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            decode_authorization_token("not base64!!"),
            Err(TokenFormatError::NotBase64)
        );
        assert_eq!(
            decode_authorization_token(&b64(b"\xff\xfe:x")),
            Err(TokenFormatError::NotUtf8)
        );
        assert_eq!(
            decode_authorization_token(&b64(b"no-colon-secret")),
            Err(TokenFormatError::NoColon)
        );
        assert_eq!(
            decode_authorization_token(&b64(b":only-password")),
            Err(TokenFormatError::NoColon)
        );
        let err = FetchError::BadToken {
            service: "ecr",
            region: "us-east-1".into(),
            problem: TokenFormatError::NoColon,
        };
        assert_eq!(
            err.to_string(),
            "ecr:GetAuthorizationToken in us-east-1 answered a token that is not of the form user:password"
        );
    }
}
