//! Property tests of the single-value checks of the cloud config: ports, booleans, zones, URLs,
//! probe paths and patterns never panic, and ports round-trip in both radixes.

use super::*;
use proptest::prelude::*;
use stratus_cloud_kit::gcfg::parse_bool;

proptest! {
    #[test]
    fn value_checks_never_panic(text in any::<String>()) {
        let _ = parse_bool(&text);
        let _ = is_region(&text);
        if let Some(region) = zone_region(&text) {
            prop_assert!(text.starts_with(region) && is_region(region));
        }
        if parse_port(&text).is_ok() {
            prop_assert!(!text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'x' || b == b'X'));
        }
        let _ = check_probe_path(&text);
        let _ = check_endpoint_url(&text);
        let _ = canonical_service(&text);
    }

    #[test]
    fn url_checks_never_panic_on_near_misses(text in "(https?|ftp|)(://)?(\\[[0-9a-f:]{0,8}\\]?|[a-z0-9.@-]{0,10})(:[0-9]{0,7})?(/[a-z ]{0,5})?") {
        if check_endpoint_url(&text).is_ok() {
            prop_assert!(text.starts_with("http"));
        }
    }

    #[test]
    fn patterns_never_panic(text in "[a-z\\\\()\\[\\]{}*+?.|^$0-9,]{0,20}") {
        if let Err(e) = check_pattern(&text) {
            prop_assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn ports_round_trip(port in any::<u16>(), zeros in 0usize..4) {
        let pad = "0".repeat(zeros);
        prop_assert_eq!(parse_port(&format!("{pad}{port}")), Ok(port));
        prop_assert_eq!(parse_port(&format!("0x{pad}{port:x}")), Ok(port));
        prop_assert_eq!(parse_port(&format!("0X{port:X}")), Ok(port));
    }

    #[test]
    fn out_of_range_ports_are_refused(port in 65_536u64..u64::MAX) {
        prop_assert!(parse_port(&port.to_string()).is_err());
        let hex = format!("0x{port:x}");
        prop_assert!(parse_port(&hex).is_err());
    }

    #[test]
    fn zones_name_their_region(
        region in "(us|eu|ap|sa|ca|me|af|il|mx)(-gov)?-(north|south|east|west|central|northeast|southeast)-[1-9]",
        az in "[a-z]{1,2}",
    ) {
        prop_assert!(is_region(&region));
        let zone = format!("{region}{az}");
        prop_assert_eq!(zone_region(&zone), Some(region.as_str()));
        prop_assert!(!is_region(&zone));
    }

    #[test]
    fn booleans_ignore_case(b in any::<bool>(), upper in prop::collection::vec(any::<bool>(), 5)) {
        let word: String = b.to_string().chars().zip(upper).map(|(c, u)| if u { c.to_ascii_uppercase() } else { c }).collect();
        prop_assert_eq!(parse_bool(&word), Some(b));
    }
}
