//! A string that must never be printed: `Debug` is redacted and there is no `Display`.

use serde::{Deserialize, Serialize};

/// A secret (ECR password, service-account token). Read it with [`Secret::expose`] only where
/// it is written to the response, sent to AWS or stored in the cache file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(&s)), "Some(Secret(<redacted>))");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn serializes_as_a_plain_string() {
        let s: Secret = serde_json::from_str("\"abc\"").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"abc\"");
    }
}
