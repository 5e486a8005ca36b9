//! How an OpenStack answer is read: which statuses mean throttling, bad credentials or server
//! trouble, and the one-line message of each service's error body (Nova, Neutron, Keystone,
//! Octavia and Cinder all shape theirs differently).

use http::StatusCode;
use serde_json::Value;
use stratus_cloud::CloudError;
use stratus_cloud_kit::{Classified, Failure};

use super::http::{HttpResponse, TransportError};

/// Longest message quoted from an error body.
const MAX_MESSAGE_CHARS: usize = 300;

/// A failed attempt: no answer, or an answer that is not a success.
#[derive(Debug, Clone)]
pub enum AttemptError {
    /// No answer (connection, TLS, timeout).
    Transport(TransportError),
    /// An error status, with the message of its body.
    Status {
        /// The status.
        status: StatusCode,
        /// The service's message.
        message: String,
    },
}

/// A success answer, or the error it is.
pub fn check(result: Result<HttpResponse, TransportError>) -> Result<HttpResponse, AttemptError> {
    let response = result.map_err(AttemptError::Transport)?;
    if response.status.is_success() {
        return Ok(response);
    }
    Err(AttemptError::Status {
        status: response.status,
        message: error_message(&response.body),
    })
}

/// What an attempt's failure means.
pub fn classify(e: &AttemptError) -> Classified {
    match e {
        AttemptError::Transport(t) => Classified {
            failure: Failure::Transient,
            code: None,
            message: t.0.clone(),
        },
        AttemptError::Status { status, message } => {
            let failure = match status.as_u16() {
                429 | 413 => Failure::Throttled,
                500 | 502 | 503 | 504 => Failure::Transient,
                401 | 403 => Failure::Unauthorized,
                _ => Failure::Rejected,
            };
            Classified {
                failure,
                code: Some(status.as_u16().to_string()),
                message: format!("{}: {message}", status.as_u16()),
            }
        }
    }
}

/// Whether the cloud answered 404 (the thing does not exist).
pub fn is_not_found(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == "404")
}

/// Whether the cloud answered 401 (the token is no longer valid).
pub fn is_expired_token(e: &CloudError) -> bool {
    matches!(e, CloudError::Unauthorized { message, .. } if message.starts_with("401"))
}

/// The message of an OpenStack error body, on one line and cut to 300 characters.
pub fn error_message(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(v) => message_of(&v).unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

fn message_of(v: &Value) -> Option<String> {
    let s = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    // Octavia: {"faultcode": ..., "faultstring": ...}
    if let Some(m) = s(v, "faultstring") {
        return Some(m);
    }
    // Neutron: {"NeutronError": {"type", "message", "detail"}}
    if let Some(e) = v.get("NeutronError") {
        return s(e, "message");
    }
    // Keystone: {"error": {"code", "message", "title"}}
    if let Some(e) = v.get("error").filter(|e| e.is_object()) {
        return s(e, "message");
    }
    // Nova and Cinder: {"itemNotFound": {"message", "code"}} (one key naming the fault)
    let obj = v.as_object()?;
    if obj.len() == 1 {
        let (_, inner) = obj.iter().next()?;
        return s(inner, "message");
    }
    s(v, "message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_every_service() {
        let cases = [
            (
                r#"{"itemNotFound": {"message": "Instance x could not be found.", "code": 404}}"#,
                "Instance x could not be found.",
            ),
            (
                r#"{"NeutronError": {"type": "PortNotFound", "message": "Port p could not be found.", "detail": ""}}"#,
                "Port p could not be found.",
            ),
            (
                r#"{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}"#,
                "The request you have made requires authentication.",
            ),
            (
                r#"{"faultcode": "Client", "faultstring": "Load Balancer lb is immutable", "debuginfo": null}"#,
                "Load Balancer lb is immutable",
            ),
            (
                "<html>502 Bad\n  Gateway</html>",
                "<html>502 Bad Gateway</html>",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(error_message(body.as_bytes()), want);
        }
        assert!(error_message("x".repeat(1000).as_bytes()).ends_with('…'));
    }

    #[test]
    fn statuses_are_classified() {
        let status = |code: u16| AttemptError::Status {
            status: StatusCode::from_u16(code).unwrap(),
            message: "m".into(),
        };
        assert_eq!(classify(&status(429)).failure, Failure::Throttled);
        assert_eq!(classify(&status(503)).failure, Failure::Transient);
        assert_eq!(classify(&status(401)).failure, Failure::Unauthorized);
        assert_eq!(classify(&status(404)).failure, Failure::Rejected);
        assert_eq!(classify(&status(409)).code.as_deref(), Some("409"));
        let t = AttemptError::Transport(TransportError("refused".into()));
        assert_eq!(classify(&t).failure, Failure::Transient);
        let nf =
            stratus_cloud_kit::call_guard::to_cloud_error("GetServer", &classify(&status(404)));
        assert!(is_not_found(&nf));
        let ex =
            stratus_cloud_kit::call_guard::to_cloud_error("GetServer", &classify(&status(401)));
        assert!(is_expired_token(&ex));
    }
}
