//! Property tests of `lookup_keys`: any node (name, providerID, addresses) yields keys or a clear
//! error, never a panic, and the keys follow the precedence providerID > instance name > DNS/IP.

use super::*;
use proptest::prelude::*;
use stratus_cloud::{NodeAddress, NodeAddressType};

fn address() -> impl Strategy<Value = NodeAddress> {
    let kind = prop::sample::select(vec![
        NodeAddressType::InternalIP,
        NodeAddressType::ExternalIP,
        NodeAddressType::InternalDNS,
        NodeAddressType::Hostname,
    ]);
    let text = prop_oneof![
        any::<std::net::Ipv4Addr>().prop_map(|ip| ip.to_string()),
        any::<std::net::Ipv6Addr>().prop_map(|ip| ip.to_string()),
        any::<String>(),
    ];
    (kind, text).prop_map(|(k, t)| NodeAddress::new(k, t))
}

fn node() -> impl Strategy<Value = NodeInfo> {
    let name = prop_oneof![
        any::<String>(),
        "i-[0-9a-f]{1,17}(\\.[a-z]{2}-[a-z]{4}-[1-9]\\.compute\\.internal)?",
        "ip-[0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3}-[0-9]{1,3}\\.ec2\\.internal",
    ];
    let pid = prop::option::of(prop_oneof![
        any::<String>(),
        "aws:///[a-z0-9-]{0,12}/i-[0-9a-f]{1,17}",
        "aws:///[a-z0-9-]{0,12}/[a-z0-9.-]{0,20}",
    ]);
    let ip = prop::option::of(prop_oneof![
        any::<std::net::IpAddr>().prop_map(|ip| ip.to_string()),
        any::<String>()
    ]);
    (name, pid, prop::collection::vec(address(), 0..40), ip).prop_map(
        |(name, provider_id, addresses, provided_node_ip)| NodeInfo {
            name,
            provider_id,
            addresses,
            provided_node_ip,
        },
    )
}

proptest! {
    #[test]
    fn keys_follow_the_precedence(n in node()) {
        match lookup_keys(&n) {
            Err(e) => {
                // Only a non-empty providerID that is not an AWS one is an error.
                let pid = n.provider_id.as_deref().unwrap_or_default();
                prop_assert!(!pid.is_empty());
                prop_assert!(AwsProviderId::parse(pid).is_err());
                prop_assert!(matches!(e, CloudError::InvalidInput(_)));
            }
            Ok(keys) => {
                prop_assert!(!keys.is_empty());
                match n.provider_id.as_deref().filter(|p| !p.is_empty()) {
                    Some(pid) => prop_assert_eq!(
                        keys,
                        vec![LookupKey::Id(AwsProviderId::parse(pid).unwrap().instance)]
                    ),
                    None => match instance_id_from_node_name(&n.name) {
                        Some(id) => prop_assert_eq!(keys, vec![LookupKey::Id(id)]),
                        None => {
                            prop_assert_eq!(&keys[0], &LookupKey::PrivateDnsName(n.name.clone()));
                            prop_assert!(keys.len() <= 1 + MAX_IP_KEYS);
                            for (i, k) in keys[1..].iter().enumerate() {
                                let LookupKey::PrivateIp(ip) = k else {
                                    return Err(TestCaseError::fail(format!("{k:?}")));
                                };
                                let parsed: std::net::IpAddr = ip.parse().unwrap();
                                prop_assert_eq!(&parsed.to_string(), ip);
                                prop_assert!(!keys[1..i + 1].contains(k));
                            }
                        }
                    },
                }
            }
        }
    }
}
