//! `CredentialProviderRequest`, as the kubelet writes it to stdin: API versions `v1`,
//! `v1beta1` and `v1alpha1` of `credentialprovider.kubelet.k8s.io`, fields `image`,
//! `serviceAccountToken` and `serviceAccountAnnotations`.
//!
//! Decoding goes through `serde_json::Value` and our own checks, so that an error message never
//! quotes a field's value (the service-account token is a secret).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::secret::Secret;

/// The request's kind.
pub const REQUEST_KIND: &str = "CredentialProviderRequest";
/// Largest request read from stdin.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The API versions of `credentialprovider.kubelet.k8s.io` this plugin speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// `v1`.
    V1,
    /// `v1beta1`.
    V1beta1,
    /// `v1alpha1`.
    V1alpha1,
}

impl ApiVersion {
    /// Every version, newest first.
    pub const ALL: [ApiVersion; 3] = [ApiVersion::V1, ApiVersion::V1beta1, ApiVersion::V1alpha1];

    /// `credentialprovider.kubelet.k8s.io/<version>`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "credentialprovider.kubelet.k8s.io/v1",
            ApiVersion::V1beta1 => "credentialprovider.kubelet.k8s.io/v1beta1",
            ApiVersion::V1alpha1 => "credentialprovider.kubelet.k8s.io/v1alpha1",
        }
    }

    /// The version of a full `apiVersion` string.
    pub fn parse(s: &str) -> Option<ApiVersion> {
        ApiVersion::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The request's version; the response answers in the same.
    pub api_version: ApiVersion,
    /// The image being pulled, e.g. `123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1`.
    pub image: String,
    /// The pod's service-account token, sent when the provider has `tokenAttributes`.
    pub service_account_token: Option<Secret>,
    /// The service-account annotations the provider config asked for.
    pub service_account_annotations: BTreeMap<String, String>,
}

/// Why stdin is not a usable request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Nothing on stdin.
    #[error("stdin is empty; expected a {REQUEST_KIND} JSON object from the kubelet")]
    Empty,
    /// More than [`MAX_REQUEST_BYTES`] on stdin.
    #[error("stdin is larger than {MAX_REQUEST_BYTES} bytes; expected one {REQUEST_KIND}")]
    TooLarge,
    /// Not JSON.
    #[error("stdin is not valid JSON ({0}); expected a {REQUEST_KIND} object")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("stdin is not a JSON object; expected a {REQUEST_KIND}")]
    NotAnObject,
    /// No `apiVersion`.
    #[error("the request has no apiVersion; supported: {supported}", supported = supported())]
    NoApiVersion,
    /// An `apiVersion` this plugin does not speak.
    #[error("unsupported apiVersion; supported: {supported}", supported = supported())]
    UnsupportedApiVersion,
    /// No `kind`.
    #[error("the request has no kind; expected {REQUEST_KIND:?}")]
    NoKind,
    /// A `kind` other than [`REQUEST_KIND`].
    #[error("the request's kind is not {REQUEST_KIND:?}")]
    WrongKind,
    /// No image, or an empty one.
    #[error("the request has no image (or it is empty)")]
    NoImage,
    /// A field of the wrong JSON type.
    #[error("the request's {field} must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// The type it must have.
        expected: &'static str,
    },
}

fn supported() -> String {
    ApiVersion::ALL.map(ApiVersion::as_str).join(", ")
}

impl RequestError {
    /// Short category for messages and metrics.
    pub fn category(&self) -> &'static str {
        "BadRequest"
    }
}

/// Decodes the kubelet's request. Unknown fields are ignored (newer kubelets may add some).
pub fn parse(input: &[u8]) -> Result<Request, RequestError> {
    if input.len() > MAX_REQUEST_BYTES {
        return Err(RequestError::TooLarge);
    }
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err(RequestError::Empty);
    }
    // serde_json's syntax errors name a line and column, never the input.
    let value: Value =
        serde_json::from_slice(input).map_err(|e| RequestError::NotJson(syntax_error(&e)))?;
    let Value::Object(object) = value else {
        return Err(RequestError::NotAnObject);
    };
    let text = |name: &'static str| -> Result<Option<&str>, RequestError> {
        match object.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(RequestError::WrongType {
                field: name,
                expected: "a string",
            }),
        }
    };
    let api_version = match text("apiVersion")? {
        None | Some("") => return Err(RequestError::NoApiVersion),
        Some(v) => ApiVersion::parse(v).ok_or(RequestError::UnsupportedApiVersion)?,
    };
    match text("kind")? {
        None | Some("") => return Err(RequestError::NoKind),
        Some(REQUEST_KIND) => {}
        Some(_) => return Err(RequestError::WrongKind),
    }
    let image = match text("image")? {
        Some(image) if !image.trim().is_empty() => image.trim().to_owned(),
        _ => return Err(RequestError::NoImage),
    };
    let service_account_token = text("serviceAccountToken")?
        .filter(|t| !t.is_empty())
        .map(Secret::new);
    let service_account_annotations = match object.get("serviceAccountAnnotations") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(v) => Ok((k.clone(), v.clone())),
                _ => Err(RequestError::WrongType {
                    field: "serviceAccountAnnotations",
                    expected: "a map of strings",
                }),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(RequestError::WrongType {
                field: "serviceAccountAnnotations",
                expected: "a map of strings",
            })
        }
    };
    Ok(Request {
        api_version,
        image,
        service_account_token,
        service_account_annotations,
    })
}

/// A JSON syntax error without anything quoted from the input.
fn syntax_error(err: &serde_json::Error) -> String {
    let what = match err.classify() {
        serde_json::error::Category::Eof => "it ends early",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected data",
        serde_json::error::Category::Io => "read error",
    };
    format!("{what} at line {} column {}", err.line(), err.column())
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1";

    #[test]
    fn every_api_version() {
        for version in ApiVersion::ALL {
            let input = format!(
                r#"{{"apiVersion":"{}","kind":"CredentialProviderRequest","image":"{IMAGE}"}}"#,
                version.as_str()
            );
            let request = parse(input.as_bytes()).unwrap();
            assert_eq!(request.api_version, version);
            assert_eq!(request.image, IMAGE);
            assert_eq!(request.service_account_token, None);
            assert!(request.service_account_annotations.is_empty());
        }
    }

    #[test]
    fn service_account_fields_and_unknown_fields() {
        let input = r#"{
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "kind": "CredentialProviderRequest",
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1",
            "serviceAccountToken": "eyJhbGciOi.payload.sig",
            "serviceAccountAnnotations": {"eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::111122223333:role/pull"},
            "someFutureField": {"x": 1}
        }"#;
        let request = parse(input.as_bytes()).unwrap();
        assert_eq!(
            request.service_account_token,
            Some(Secret::new("eyJhbGciOi.payload.sig"))
        );
        assert_eq!(
            request.service_account_annotations["eks.amazonaws.com/ecr-role-arn"],
            "arn:aws:iam::111122223333:role/pull"
        );
        // Debug never shows the token.
        assert!(!format!("{request:?}").contains("payload"));
    }

    #[test]
    fn empty_token_and_null_annotations_mean_absent() {
        let input = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"x","serviceAccountToken":"","serviceAccountAnnotations":null}"#;
        let request = parse(input.as_bytes()).unwrap();
        assert_eq!(request.service_account_token, None);
        assert!(request.service_account_annotations.is_empty());
    }

    #[test]
    fn malformed_requests_are_explained() {
        let v1 = "credentialprovider.kubelet.k8s.io/v1";
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "stdin is empty"),
            ("  \n".into(), "stdin is empty"),
            ("{".into(), "stdin is not valid JSON (it ends early at line 1 column 1)"),
            ("{\"apiVersion\": secret-value}".into(), "stdin is not valid JSON (syntax error at line 1"),
            ("[1,2]".into(), "stdin is not a JSON object"),
            ("\"text\"".into(), "stdin is not a JSON object"),
            (r#"{"kind":"CredentialProviderRequest","image":"x"}"#.into(), "no apiVersion; supported: credentialprovider.kubelet.k8s.io/v1, credentialprovider.kubelet.k8s.io/v1beta1, credentialprovider.kubelet.k8s.io/v1alpha1"),
            (r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v2","kind":"CredentialProviderRequest","image":"x"}"#.into(), "unsupported apiVersion; supported: "),
            (r#"{"apiVersion":"v1","kind":"CredentialProviderRequest","image":"x"}"#.into(), "unsupported apiVersion; supported: "),
            (format!(r#"{{"apiVersion":"{v1}","image":"x"}}"#), "no kind"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderResponse","image":"x"}}"#), "kind is not \"CredentialProviderRequest\""),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest"}}"#), "no image"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest","image":"  "}}"#), "no image"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest","image":7}}"#), "image must be a string"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest","image":"x","serviceAccountToken":["secret-value"]}}"#), "serviceAccountToken must be a string"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest","image":"x","serviceAccountAnnotations":"secret-value"}}"#), "serviceAccountAnnotations must be a map of strings"),
            (format!(r#"{{"apiVersion":"{v1}","kind":"CredentialProviderRequest","image":"x","serviceAccountAnnotations":{{"a":1}}}}"#), "serviceAccountAnnotations must be a map of strings"),
        ];
        for (input, want) in cases {
            let err = parse(input.as_bytes()).expect_err(&input).to_string();
            assert!(err.contains(want), "{input}: {err}");
            assert!(!err.contains("secret-value"), "{input}: {err}");
        }
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert_eq!(parse(&big), Err(RequestError::TooLarge));
    }
}
