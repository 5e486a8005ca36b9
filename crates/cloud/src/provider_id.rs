//! Provider IDs (`spec.providerID`): `<scheme>://<rest>`, typed and checked once.

use std::fmt;

/// Longest provider ID accepted (a hostile Node may carry a huge one).
pub const MAX_PROVIDER_ID_CHARS: usize = 512;

/// A provider ID such as `aws:///us-east-1a/i-0abc` or `openstack:///8f1c…`.
///
/// Only the shape common to every cloud is checked here (a scheme of ASCII letters, digits, `-`,
/// `+` or `.`, then `://`); what follows is the provider's business. Whether two IDs name the
/// same instance is answered by the provider ([`crate::InstancesV2::is_same_instance`]), never
/// by comparing strings in a generic controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderId {
    text: String,
    scheme_len: usize,
}

/// Why a text is not a provider ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderIdError {
    /// No `<scheme>://` at the start.
    #[error("provider ID {0:?} has no scheme (want <provider>://…)")]
    NoScheme(String),
    /// Longer than [`MAX_PROVIDER_ID_CHARS`].
    #[error("provider ID is {0} characters long; at most {MAX_PROVIDER_ID_CHARS} are accepted")]
    TooLong(usize),
}

impl ProviderId {
    /// Parses `<scheme>://<rest>`.
    pub fn parse(text: &str) -> Result<ProviderId, ProviderIdError> {
        let chars = text.chars().count();
        if chars > MAX_PROVIDER_ID_CHARS {
            return Err(ProviderIdError::TooLong(chars));
        }
        let scheme_len = text
            .find("://")
            .filter(|&n| {
                n > 0
                    && text[..n]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
            })
            .ok_or_else(|| ProviderIdError::NoScheme(text.chars().take(100).collect()))?;
        Ok(ProviderId {
            text: text.to_string(),
            scheme_len,
        })
    }

    /// Builds `<scheme>://<rest>` from parts a provider knows to be valid.
    pub fn new(scheme: &str, rest: &str) -> Result<ProviderId, ProviderIdError> {
        ProviderId::parse(&format!("{scheme}://{rest}"))
    }

    /// The scheme, e.g. `aws`.
    pub fn scheme(&self) -> &str {
        &self.text[..self.scheme_len]
    }

    /// What follows `://`.
    pub fn rest(&self) -> &str {
        &self.text[self.scheme_len + 3..]
    }

    /// The whole ID, as written to `spec.providerID`.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_scheme_and_rest() {
        let id = ProviderId::parse("aws:///us-east-1a/i-0abc").unwrap();
        assert_eq!(id.scheme(), "aws");
        assert_eq!(id.rest(), "/us-east-1a/i-0abc");
        assert_eq!(id.as_str(), "aws:///us-east-1a/i-0abc");
        let id = ProviderId::new("openstack", "/8f1c").unwrap();
        assert_eq!(id.to_string(), "openstack:///8f1c");
        assert_eq!(ProviderId::parse("dvp://vm-1").unwrap().rest(), "vm-1");
    }

    #[test]
    fn refuses_what_has_no_scheme_or_is_huge() {
        for bad in ["", "i-0abc", "://x", "a b://x", "é://x"] {
            assert!(
                matches!(ProviderId::parse(bad), Err(ProviderIdError::NoScheme(_))),
                "{bad}"
            );
        }
        let huge = format!("aws:///{}", "a".repeat(MAX_PROVIDER_ID_CHARS));
        assert!(matches!(
            ProviderId::parse(&huge),
            Err(ProviderIdError::TooLong(_))
        ));
    }
}
