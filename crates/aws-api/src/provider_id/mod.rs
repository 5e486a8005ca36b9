//! AWS provider IDs (`aws:///<az>/<instance-id>`) and EC2 node-name forms.

use std::fmt;

/// An EC2 instance ID such as `i-0123456789abcdef0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(String);

impl InstanceId {
    /// Accepts `i-` followed by 1–32 lowercase hex digits (EC2 uses 8 or 17).
    pub fn parse(s: &str) -> Option<InstanceId> {
        let hex = s.strip_prefix("i-")?;
        let valid = !hex.is_empty()
            && hex.len() <= 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| InstanceId(s.to_string()))
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A parsed AWS provider ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsProviderId {
    /// The availability zone, when the ID carries one.
    pub zone: Option<String>,
    /// The instance.
    pub instance: InstanceId,
}

/// Why a provider ID could not be used. The ID is quoted cut to [`MAX_SHOWN_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderIdError {
    #[error("provider ID {0:?} is not an AWS provider ID (want aws:///<zone>/<instance-id>)")]
    /// Not `aws://…`.
    NotAws(String),
    #[error("provider ID {0:?} names no EC2 instance")]
    /// No EC2 instance ID at its end.
    BadInstance(String),
    #[error("provider ID {0:?} names a Fargate task, which has no EC2 instance")]
    /// A Fargate pod, which has no instance.
    Fargate(String),
}

/// Longest part of a provider ID quoted in an error (a hostile Node may carry a huge one).
pub const MAX_SHOWN_CHARS: usize = 200;

/// `text`, cut to [`MAX_SHOWN_CHARS`] characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl AwsProviderId {
    /// Parses `aws:///<az>/<id>`, `aws:////<id>`, `aws://<az>/<id>` or a bare `i-…`.
    pub fn parse(text: &str) -> Result<AwsProviderId, ProviderIdError> {
        if let Some(instance) = InstanceId::parse(text) {
            return Ok(AwsProviderId {
                zone: None,
                instance,
            });
        }
        let rest = text
            .strip_prefix("aws://")
            .ok_or_else(|| ProviderIdError::NotAws(shown(text)))?;
        // As upstream (`strings.Trim(url.Path, "/")`): slashes at either end do not count.
        let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
        let (zone, id) = match parts.as_slice() {
            [id] => (None, *id),
            [zone, id] => (Some(*zone), *id),
            _ => return Err(ProviderIdError::NotAws(shown(text))),
        };
        if id.starts_with("fargate-") {
            return Err(ProviderIdError::Fargate(shown(text)));
        }
        let instance =
            InstanceId::parse(id).ok_or_else(|| ProviderIdError::BadInstance(shown(text)))?;
        Ok(AwsProviderId {
            zone: zone.filter(|z| !z.is_empty()).map(str::to_string),
            instance,
        })
    }

    /// Formats as upstream does: `aws:///<az>/<id>`.
    pub fn format(zone: &str, instance: &InstanceId) -> String {
        format!("aws:///{zone}/{instance}")
    }

    /// The provider ID of an instance, as written to `spec.providerID`.
    pub fn of(zone: &str, instance: &InstanceId) -> stratus_cloud::ProviderId {
        stratus_cloud::ProviderId::parse(&Self::format(zone, instance))
            .expect("an AWS provider ID has the aws:// scheme and a short body")
    }

    /// Whether `a` and `b` name the same instance (with or without a zone, any accepted form).
    pub fn same_instance(a: &str, b: &str) -> bool {
        matches!(
            (AwsProviderId::parse(a), AwsProviderId::parse(b)),
            (Ok(a), Ok(b)) if a.instance == b.instance
        )
    }
}

/// The instance ID a resource-based node name names: `i-…` or `i-….<region>.compute.internal`.
pub fn instance_id_from_node_name(name: &str) -> Option<InstanceId> {
    let first = name.split('.').next()?;
    let id = InstanceId::parse(first)?;
    let rest = &name[first.len()..];
    (rest.is_empty() || rest.ends_with(".compute.internal")).then_some(id)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_provider_id_forms() {
        let cases = [
            ("aws:///us-east-1a/i-0abc", Some("us-east-1a"), "i-0abc"),
            ("aws:////i-0abc", None, "i-0abc"),
            ("aws://us-east-1a/i-0abc", Some("us-east-1a"), "i-0abc"),
            ("i-0123abcd", None, "i-0123abcd"),
            ("aws:///us-east-1a/i-0abc/", Some("us-east-1a"), "i-0abc"),
        ];
        for (text, zone, id) in cases {
            let p = AwsProviderId::parse(text).unwrap();
            assert_eq!(p.zone.as_deref(), zone, "{text}");
            assert_eq!(p.instance.as_str(), id, "{text}");
        }
    }

    #[test]
    fn rejects_bad_provider_ids() {
        assert!(matches!(
            AwsProviderId::parse("gce://p/z/n"),
            Err(ProviderIdError::NotAws(_))
        ));
        assert!(matches!(
            AwsProviderId::parse("aws:///us-east-1a/fargate-10.0.0.1"),
            Err(ProviderIdError::Fargate(_))
        ));
        assert!(matches!(
            AwsProviderId::parse("aws:///us-east-1a/vm-1"),
            Err(ProviderIdError::BadInstance(_))
        ));
        assert!(AwsProviderId::parse("aws:///a/b/i-1").is_err());
        assert!(AwsProviderId::parse("").is_err());
    }

    #[test]
    fn errors_quote_a_huge_id_only_in_part() {
        let huge = format!("aws:///us-east-1a/i-{}", "z".repeat(100_000));
        let e = AwsProviderId::parse(&huge).unwrap_err().to_string();
        assert!(e.len() < 400, "{} bytes", e.len());
    }

    #[test]
    fn formats_like_upstream() {
        let id = InstanceId::parse("i-0abc").unwrap();
        assert_eq!(
            AwsProviderId::format("eu-west-1b", &id),
            "aws:///eu-west-1b/i-0abc"
        );
        let back = AwsProviderId::parse(&AwsProviderId::format("eu-west-1b", &id)).unwrap();
        assert_eq!(back.instance, id);
    }

    #[test]
    fn same_instance_whatever_the_form() {
        assert!(AwsProviderId::same_instance(
            "aws:////i-0abc",
            "aws:///us-east-1a/i-0abc"
        ));
        assert!(AwsProviderId::same_instance(
            "i-0abc",
            "aws://us-east-1a/i-0abc"
        ));
        assert!(!AwsProviderId::same_instance(
            "aws:///us-east-1a/i-0abc",
            "aws:///us-east-1a/i-0abd"
        ));
        assert!(!AwsProviderId::same_instance(
            "gce://x/i-0abc",
            "aws:///z/i-0abc"
        ));
    }

    #[test]
    fn node_names() {
        assert_eq!(
            instance_id_from_node_name("i-0abc").map(|i| i.to_string()),
            Some("i-0abc".into())
        );
        assert_eq!(
            instance_id_from_node_name("i-0abc.us-west-2.compute.internal").map(|i| i.to_string()),
            Some("i-0abc".into())
        );
        assert_eq!(instance_id_from_node_name("ip-10-0-0-1.ec2.internal"), None);
        assert_eq!(instance_id_from_node_name("i-0abc.example.com"), None);
        assert_eq!(instance_id_from_node_name("worker-1"), None);
    }
}
