//! `CredentialProviderResponse`, written to stdout in the request's API version:
//! `cacheKeyType: Registry`, `cacheDuration` as a Go duration, `auth` keyed by the registry
//! host.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::duration::go_duration;
use crate::request::ApiVersion;
use crate::secret::Secret;

/// The response's kind.
pub const RESPONSE_KIND: &str = "CredentialProviderResponse";

/// Credentials for one registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthConfig {
    /// The registry user name.
    pub username: String,
    /// The registry password.
    pub password: Secret,
}

/// A response to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The request's version.
    pub api_version: ApiVersion,
    /// How long the kubelet may cache the answer, in seconds (0: not at all).
    pub cache_seconds: u64,
    /// The registry host (with port, if any) the credentials are for.
    pub registry: String,
    /// The credentials.
    pub auth: AuthConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    kind: &'static str,
    api_version: &'static str,
    cache_key_type: &'static str,
    cache_duration: String,
    auth: BTreeMap<&'a str, &'a AuthConfig>,
}

impl Response {
    /// The JSON the kubelet reads, with a trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let wire = Wire {
            kind: RESPONSE_KIND,
            api_version: self.api_version.as_str(),
            cache_key_type: "Registry",
            cache_duration: go_duration(self.cache_seconds),
            auth: BTreeMap::from([(self.registry.as_str(), &self.auth)]),
        };
        let mut out = serde_json::to_vec(&wire).expect("plain strings serialize");
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request;

    fn response(api_version: ApiVersion, cache_seconds: u64) -> Response {
        Response {
            api_version,
            cache_seconds,
            registry: "123456789012.dkr.ecr.us-east-1.amazonaws.com".into(),
            auth: AuthConfig {
                username: "AWS".into(),
                password: Secret::new("s3cr3t-pw"),
            },
        }
    }

    #[test]
    fn wire_format() {
        let json: serde_json::Value =
            serde_json::from_slice(&response(ApiVersion::V1, 21_570).to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "CredentialProviderResponse",
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "cacheKeyType": "Registry",
                "cacheDuration": "5h59m30s",
                "auth": {
                    "123456789012.dkr.ecr.us-east-1.amazonaws.com": {
                        "username": "AWS",
                        "password": "s3cr3t-pw"
                    }
                }
            })
        );
    }

    #[test]
    fn answers_in_the_request_version() {
        for version in ApiVersion::ALL {
            let input = format!(
                r#"{{"apiVersion":"{}","kind":"CredentialProviderRequest","image":"123456789012.dkr.ecr.us-east-1.amazonaws.com/a"}}"#,
                version.as_str()
            );
            let request = request::parse(input.as_bytes()).unwrap();
            let out = response(request.api_version, 0).to_json();
            let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(json["apiVersion"], version.as_str());
            assert_eq!(json["cacheDuration"], "0s");
            assert!(out.ends_with(b"}\n"));
        }
    }

    #[test]
    fn debug_hides_the_password() {
        assert!(!format!("{:?}", response(ApiVersion::V1, 1)).contains("s3cr3t"));
    }
}
