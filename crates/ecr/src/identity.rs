//! Whose credentials ask ECR for a token: the node's (SDK default chain), or a role assumed with
//! the pod's service-account token (`AssumeRoleWithWebIdentity`), named by the service
//! account's `eks.amazonaws.com/ecr-role-arn` annotation or else by `AWS_ECR_ROLE_ARN`.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::request::Request;
use crate::secret::Secret;

/// Service-account annotation naming the role to assume.
pub const ROLE_ANNOTATION: &str = "eks.amazonaws.com/ecr-role-arn";
/// Environment variable naming the role when the annotation does not.
pub const ROLE_ENV: &str = "AWS_ECR_ROLE_ARN";

/// Who asks AWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The node's credentials: the SDK default chain (environment, profile, web identity,
    /// ECS, IMDS).
    Node,
    /// `AssumeRoleWithWebIdentity` with the pod's service-account token, then ECR with the
    /// role's credentials.
    WebIdentity {
        /// The role to assume.
        role_arn: String,
        /// The pod's service-account token.
        token: Secret,
        /// The service account the token stands for (issuer, subject, audience, UID), so that
        /// the cache never hands one service account's answer to another.
        service_account: String,
    },
}

impl Identity {
    /// The role, or `""` for the node's credentials (a cache key part).
    pub fn role(&self) -> &str {
        match self {
            Identity::Node => "",
            Identity::WebIdentity { role_arn, .. } => role_arn,
        }
    }

    /// The service account, or `""` (a cache key part).
    pub fn service_account(&self) -> &str {
        match self {
            Identity::Node => "",
            Identity::WebIdentity {
                service_account, ..
            } => service_account,
        }
    }
}

/// A role ARN that cannot be assumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name} is {}, which is not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)", stratus_runtime::redact::quoted_name(arn, 2048))]
pub struct RoleArnError {
    /// Where the ARN came from (an annotation or an environment variable).
    pub source_name: String,
    /// The ARN as given.
    pub arn: String,
}

/// Picks the identity for `request`. With a service-account token, the role comes from the
/// annotation, else from `env_role` (`AWS_ECR_ROLE_ARN`); without a token, or without a role,
/// the node's credentials are used.
pub fn choose(request: &Request, env_role: Option<&str>) -> Result<Identity, RoleArnError> {
    let Some(token) = &request.service_account_token else {
        return Ok(Identity::Node);
    };
    let annotated = request
        .service_account_annotations
        .get(ROLE_ANNOTATION)
        .map(|r| r.trim())
        .filter(|r| !r.is_empty());
    let (source_name, role) = match (annotated, env_role.map(str::trim).filter(|r| !r.is_empty())) {
        (Some(role), _) => (format!("the {ROLE_ANNOTATION} annotation"), role),
        (None, Some(role)) => (ROLE_ENV.to_owned(), role),
        (None, None) => return Ok(Identity::Node),
    };
    if !is_role_arn(role) {
        return Err(RoleArnError {
            source_name,
            arn: role.to_owned(),
        });
    }
    Ok(Identity::WebIdentity {
        role_arn: role.to_owned(),
        token: token.clone(),
        service_account: service_account_of(token),
    })
}

/// `arn:<partition>:iam::<12 digits>:role/<path and name>`.
pub fn is_role_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts[..] else {
        return false;
    };
    let name = resource.strip_prefix("role/").unwrap_or_default();
    prefix == "arn"
        && partition.starts_with("aws")
        && service == "iam"
        && region.is_empty()
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && !name.is_empty()
        && !name.ends_with('/')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-/".contains(&b))
}

/// The service account a kubelet-issued token stands for, from its (unverified: the kubelet
/// is trusted) claims `iss`, `sub`, `aud` and the service account's UID. A token that cannot
/// be read stands for itself (its SHA-256), which is never wrong, only cached less.
pub fn service_account_of(token: &Secret) -> String {
    claims(token.expose()).unwrap_or_else(|| {
        let digest = Sha256::digest(token.expose().as_bytes());
        format!("token-sha256:{}", hex(&digest))
    })
}

fn claims(jwt: &str) -> Option<String> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let sub = claims.get("sub")?.as_str()?;
    let iss = claims.get("iss").and_then(|v| v.as_str()).unwrap_or("");
    let aud = match claims.get("aud") {
        Some(serde_json::Value::String(a)) => a.clone(),
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .filter_map(|a| a.as_str())
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    };
    let uid = claims
        .pointer("/kubernetes.io/serviceaccount/uid")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    Some(format!("iss={iss} sub={sub} aud={aud} uid={uid}"))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ApiVersion;
    use std::collections::BTreeMap;

    const ROLE_A: &str = "arn:aws:iam::111122223333:role/ecr-pull";
    const ROLE_B: &str = "arn:aws:iam::444455556666:role/team/ecr-pull";

    fn jwt(claims: serde_json::Value) -> String {
        let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.sig",
            b64(br#"{"alg":"RS256"}"#),
            b64(claims.to_string().as_bytes())
        )
    }

    fn request(token: Option<&str>, annotation: Option<&str>) -> Request {
        Request {
            api_version: ApiVersion::V1,
            image: "x".into(),
            service_account_token: token.map(Secret::new),
            service_account_annotations: annotation
                .map(|a| BTreeMap::from([(ROLE_ANNOTATION.to_owned(), a.to_owned())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn annotation_first_then_environment() {
        let token = jwt(serde_json::json!({"sub": "system:serviceaccount:ns:app"}));
        let got = choose(&request(Some(&token), Some(ROLE_A)), Some(ROLE_B)).unwrap();
        assert_eq!(got.role(), ROLE_A);
        let got = choose(&request(Some(&token), None), Some(ROLE_B)).unwrap();
        assert_eq!(got.role(), ROLE_B);
        let got = choose(&request(Some(&token), Some("  ")), Some(ROLE_B)).unwrap();
        assert_eq!(got.role(), ROLE_B);
    }

    #[test]
    fn node_credentials_without_a_token_or_without_a_role() {
        assert_eq!(
            choose(&request(None, Some(ROLE_A)), Some(ROLE_B)).unwrap(),
            Identity::Node
        );
        assert_eq!(
            choose(&request(Some("t.o.k"), None), None).unwrap(),
            Identity::Node
        );
        assert_eq!(
            choose(&request(Some("t.o.k"), None), Some("")).unwrap(),
            Identity::Node
        );
    }

    #[test]
    fn bad_role_arns_are_refused_by_source() {
        let err = choose(&request(Some("t"), Some("my-role")), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the eks.amazonaws.com/ecr-role-arn annotation is \"my-role\", which is not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)"
        );
        let err = choose(&request(Some("t"), None), Some("arn:aws:iam::1:role/x")).unwrap_err();
        assert!(err.to_string().starts_with("AWS_ECR_ROLE_ARN is"), "{err}");
    }

    #[test]
    fn role_arns() {
        for ok in [
            ROLE_A,
            ROLE_B,
            "arn:aws-cn:iam::111122223333:role/pull",
            "arn:aws-us-gov:iam::111122223333:role/a+b=c,d.e@f_g-h",
        ] {
            assert!(is_role_arn(ok), "{ok}");
        }
        for bad in [
            "",
            "arn:aws:iam::111122223333:user/bob",
            "arn:aws:iam::111122223333:role/",
            "arn:aws:iam::111122223333:role/a/",
            "arn:aws:iam:us-east-1:111122223333:role/x",
            "arn:aws:sts::111122223333:role/x",
            "arn:aws:iam::11112222333:role/x",
            "arn:gcp:iam::111122223333:role/x",
            "arn:aws:iam::111122223333:role/x y",
        ] {
            assert!(!is_role_arn(bad), "{bad}");
        }
    }

    #[test]
    fn service_account_from_claims() {
        let token = jwt(serde_json::json!({
            "iss": "https://kubernetes.default.svc",
            "sub": "system:serviceaccount:team:puller",
            "aud": ["sts.amazonaws.com"],
            "kubernetes.io": {"serviceaccount": {"name": "puller", "uid": "u-1"}, "pod": {"name": "p-1"}},
        }));
        assert_eq!(
            service_account_of(&Secret::new(token)),
            "iss=https://kubernetes.default.svc sub=system:serviceaccount:team:puller aud=sts.amazonaws.com uid=u-1"
        );
        // Two pods of one service account are the same service account.
        let other_pod = jwt(serde_json::json!({
            "iss": "https://kubernetes.default.svc",
            "sub": "system:serviceaccount:team:puller",
            "aud": "sts.amazonaws.com",
            "kubernetes.io": {"serviceaccount": {"name": "puller", "uid": "u-1"}, "pod": {"name": "p-2"}},
        }));
        assert_eq!(
            service_account_of(&Secret::new(other_pod)),
            "iss=https://kubernetes.default.svc sub=system:serviceaccount:team:puller aud=sts.amazonaws.com uid=u-1"
        );
    }

    #[test]
    fn unreadable_tokens_stand_for_themselves() {
        let a = service_account_of(&Secret::new("opaque-token-a"));
        let b = service_account_of(&Secret::new("opaque-token-b"));
        assert!(a.starts_with("token-sha256:"), "{a}");
        assert_ne!(a, b);
        assert!(!a.contains("opaque"));
    }
}
