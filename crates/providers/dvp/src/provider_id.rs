//! DVP provider IDs: `dvp://<VirtualMachine name>` (as Deckhouse's CCM and capdvp write them).

use stratus_cloud::ProviderId;

/// The provider ID scheme and the `--cloud-provider` name.
pub const SCHEME: &str = "dvp";

/// The provider ID of the VM `vm`.
pub fn provider_id(vm: &str) -> Option<ProviderId> {
    ProviderId::new(SCHEME, vm).ok()
}

/// The VM name in a `dvp://<name>` provider ID; `None` for another scheme or an empty name.
pub fn vm_name(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix("dvp://")
        .filter(|rest| !rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_builds() {
        let table = [
            ("dvp://vm-1", Some("vm-1")),
            ("dvp://", None),
            ("aws:///us-east-1a/i-1", None),
            ("dvp:/vm", None),
            ("", None),
        ];
        for (text, want) in table {
            assert_eq!(vm_name(text), want, "{text}");
        }
        assert_eq!(provider_id("vm-1").unwrap().as_str(), "dvp://vm-1");
    }
}
