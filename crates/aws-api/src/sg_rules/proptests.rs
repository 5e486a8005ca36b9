//! Property tests of source-range checking: any list of strings is accepted or refused without
//! a panic, and what is accepted becomes a bounded set of canonical CIDRs.

use super::*;
use proptest::prelude::*;

fn range() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<std::net::Ipv4Addr>(), 0u8..=32).prop_map(|(a, p)| format!("{a}/{p}")),
        (any::<std::net::Ipv6Addr>(), 0u8..=128).prop_map(|(a, p)| format!(" {a}/{p} ")),
        "[0-9./: +a-f-]{0,20}",
        any::<String>(),
    ]
}

proptest! {
    #[test]
    fn checked_ranges_become_canonical_cidrs(ranges in prop::collection::vec(range(), 0..80)) {
        match check_source_ranges(&ranges) {
            Ok(()) => {
                let out = source_ranges(&ranges);
                prop_assert!(!out.is_empty() && out.len() <= MAX_SOURCE_RANGES);
                for r in &out {
                    let c = Cidr::parse(r).unwrap();
                    prop_assert_eq!(&c.to_string(), r);
                }
                let rules = listener_rules(&[80, 443], &out);
                prop_assert_eq!(rules.len(), out.len() * 3);
            }
            Err(e) => prop_assert!(e.starts_with("loadBalancerSourceRanges: ")),
        }
    }
}
