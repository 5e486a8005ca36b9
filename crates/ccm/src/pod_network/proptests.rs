//! Property tests of the pod-network flags: `--cluster-cidr` never panics and round-trips, and
//! any mask flags are checked without a panic and give node masks inside their cluster CIDR.

use super::*;
use proptest::prelude::*;
use std::net::IpAddr;

fn v4() -> impl Strategy<Value = Cidr> {
    (any::<u32>(), 0u8..=32).prop_map(|(a, p)| Cidr::new(IpAddr::V4(a.into()), p).unwrap())
}

fn v6() -> impl Strategy<Value = Cidr> {
    (any::<u128>(), 0u8..=128).prop_map(|(a, p)| Cidr::new(IpAddr::V6(a.into()), p).unwrap())
}

/// One CIDR, or one of each family in either order.
fn cluster() -> impl Strategy<Value = Vec<Cidr>> {
    prop_oneof![
        v4().prop_map(|c| vec![c]),
        v6().prop_map(|c| vec![c]),
        (v4(), v6()).prop_map(|(a, b)| vec![a, b]),
        (v6(), v4()).prop_map(|(a, b)| vec![a, b]),
    ]
}

proptest! {
    #[test]
    fn cluster_cidr_never_panics(text in any::<String>()) {
        if let Ok(ClusterCidrs(cidrs)) = parse_cluster_cidrs(&text) {
            prop_assert!(cidrs.len() <= 2);
        }
    }

    #[test]
    fn cluster_cidr_never_panics_on_near_misses(text in "[0-9a-f:./, ]{0,60}") {
        let _ = parse_cluster_cidrs(&text);
    }

    #[test]
    fn cluster_cidr_round_trips(cidrs in cluster(), sep in prop::sample::select(vec![",", ", ", " ,"])) {
        let text = cidrs.iter().map(Cidr::to_string).collect::<Vec<_>>().join(sep);
        prop_assert_eq!(parse_cluster_cidrs(&text), Ok(ClusterCidrs(cidrs)));
    }

    #[test]
    fn two_of_one_family_are_refused(a in v4(), b in v4()) {
        let text = format!("{a},{b}");
        prop_assert!(parse_cluster_cidrs(&text).is_err());
    }

    #[test]
    fn any_masks_are_checked_without_panic(
        cidrs in cluster(),
        legacy in prop::option::of(any::<u8>()),
        ipv4 in prop::option::of(any::<u8>()),
        ipv6 in prop::option::of(any::<u8>()),
    ) {
        let masks = MaskFlags { legacy, ipv4, ipv6 };
        match pod_network(&ClusterCidrs(cidrs.clone()), true, masks) {
            Ok(net) => {
                let ranges = net.allocate.unwrap();
                prop_assert_eq!(ranges.len(), cidrs.len());
                for (cidr, mask) in ranges {
                    prop_assert!(mask >= cidr.prefix_len() && mask <= cidr.max_prefix_len());
                }
            }
            Err(e) => prop_assert!(e.starts_with("--")),
        }
        // Without allocation the masks are not looked at.
        prop_assert!(pod_network(&ClusterCidrs(cidrs), false, masks).is_ok());
    }
}
