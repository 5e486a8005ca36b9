//! Property tests of the CIDR parser: no panic on any text, and format → parse round-trips.

use super::*;
use proptest::prelude::*;

/// Any address with any prefix that fits its family.
fn cidr() -> impl Strategy<Value = Cidr> {
    prop_oneof![
        (any::<u32>(), 0u8..=32).prop_map(|(a, p)| Cidr::new(IpAddr::V4(a.into()), p).unwrap()),
        (any::<u128>(), 0u8..=128).prop_map(|(a, p)| Cidr::new(IpAddr::V6(a.into()), p).unwrap()),
    ]
}

/// Text that looks almost like a CIDR: digits, hex, dots, colons, slashes and spaces.
fn cidr_soup() -> impl Strategy<Value = String> {
    "[0-9a-fA-F:./ +-]{0,48}"
}

proptest! {
    #[test]
    fn parse_never_panics(text in any::<String>()) {
        if let Err(e) = Cidr::parse(&text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn parse_never_panics_on_near_misses(text in cidr_soup()) {
        match Cidr::parse(&text) {
            Ok(c) => prop_assert!(c.prefix_len() <= c.max_prefix_len()),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn display_round_trips(c in cidr()) {
        prop_assert_eq!(Cidr::parse(&c.to_string()), Ok(c));
        prop_assert_eq!(c.to_string().parse::<Cidr>(), Ok(c));
    }

    #[test]
    fn host_bits_are_cleared_and_the_host_is_inside(a in any::<u32>(), p in 0u8..=32) {
        let host = IpAddr::V4(a.into());
        let c = Cidr::parse(&format!("{host}/{p}")).unwrap();
        prop_assert_eq!(c.prefix_len(), p);
        let netmask = u32::MAX.checked_shl(32 - u32::from(p)).unwrap_or(0);
        prop_assert_eq!(c.bits(), u128::from(a & netmask));
        // The network address and the original host address both lie in the network.
        let network = Cidr::new(c.network(), 32).unwrap();
        let host = Cidr::new(host, 32).unwrap();
        prop_assert!(c.contains(&network));
        prop_assert!(c.contains(&host));
        // Normalising twice changes nothing.
        prop_assert_eq!(Cidr::new(c.network(), p), Some(c));
    }

    #[test]
    fn ipv6_host_is_inside(a in any::<u128>(), p in 0u8..=128) {
        let host = IpAddr::V6(a.into());
        let c = Cidr::parse(&format!("{host}/{p}")).unwrap();
        prop_assert!(c.is_ipv6());
        prop_assert!(c.contains(&Cidr::new(c.network(), 128).unwrap()));
        prop_assert!(c.contains(&Cidr::new(host, 128).unwrap()));
        prop_assert_eq!(Cidr::from_bits(true, c.bits(), p), Some(c));
    }

    #[test]
    fn too_long_prefixes_are_refused(a in any::<u32>(), p in 33u16..=999) {
        let text = format!("{}/{p}", Ipv4Addr::from(a));
        prop_assert!(Cidr::parse(&text).is_err());
    }

    #[test]
    fn containment_is_a_partial_order(a in cidr(), b in cidr()) {
        prop_assert!(a.contains(&a));
        if a.contains(&b) && b.contains(&a) {
            prop_assert_eq!(a, b);
        }
        if a.contains(&b) {
            prop_assert!(a.prefix_len() <= b.prefix_len());
            prop_assert_eq!(a.is_ipv6(), b.is_ipv6());
        }
        prop_assert_eq!(a.overlaps(&b), b.overlaps(&a));
    }
}
