//! OpenStack provider IDs: `openstack:///<server-id>`, or `openstack://<region>/<server-id>`
//! (upstream's `OS_CCM_REGIONAL=true`); a bare ID is read as `openstack://<id>`, as upstream.

use stratus_cloud::ProviderId;

/// The provider name and ID scheme.
pub const SCHEME: &str = "openstack";

/// Environment variable asking for regional provider IDs, as upstream.
pub const REGIONAL_ENV: &str = "OS_CCM_REGIONAL";

/// A parsed provider ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackProviderId {
    /// The server's ID.
    pub server: String,
    /// The region, when the ID carries one.
    pub region: Option<String>,
}

/// Why a provider ID is not an OpenStack one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("provider ID {0:?} is not an OpenStack provider ID (want openstack:///<server-id> or openstack://<region>/<server-id>)")]
pub struct NotOpenStack(pub String);

impl OpenStackProviderId {
    /// Parses a provider ID.
    pub fn parse(text: &str) -> Result<OpenStackProviderId, NotOpenStack> {
        let shown = || NotOpenStack(text.chars().take(200).collect());
        let full = if !text.is_empty() && !text.contains("://") {
            format!("{SCHEME}://{text}")
        } else {
            text.to_string()
        };
        let rest = full.strip_prefix("openstack://").ok_or_else(shown)?;
        let (region, server) = rest.split_once('/').ok_or_else(shown)?;
        if server.is_empty() || server.contains('/') || server.len() > 255 {
            return Err(shown());
        }
        Ok(OpenStackProviderId {
            server: server.to_string(),
            region: (!region.is_empty()).then(|| region.to_string()),
        })
    }

    /// The provider ID of `server`: regional when `region` is given.
    pub fn format(server: &str, region: Option<&str>) -> ProviderId {
        ProviderId::new(SCHEME, &format!("{}/{server}", region.unwrap_or("")))
            .expect("an OpenStack provider ID has a valid scheme")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_as_upstream() {
        let p = OpenStackProviderId::parse("openstack:///8f1c").unwrap();
        assert_eq!((p.server.as_str(), p.region), ("8f1c", None));
        let p = OpenStackProviderId::parse("openstack://RegionOne/8f1c").unwrap();
        assert_eq!(p.region.as_deref(), Some("RegionOne"));
        assert!(OpenStackProviderId::parse("aws:///us-east-1a/i-1").is_err());
        assert!(OpenStackProviderId::parse("openstack:///").is_err());
        assert!(OpenStackProviderId::parse("openstack:///a/b").is_err());
        assert_eq!(
            OpenStackProviderId::format("8f1c", None).as_str(),
            "openstack:///8f1c"
        );
        assert_eq!(
            OpenStackProviderId::format("8f1c", Some("R1")).as_str(),
            "openstack://R1/8f1c"
        );
    }
}
