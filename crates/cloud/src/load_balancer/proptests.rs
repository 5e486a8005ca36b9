//! Property tests of what the load-balancer types derive from Service input: default names and
//! port protocols.

use super::*;
use proptest::prelude::*;

proptest! {
    #[test]
    fn default_name_is_always_a_valid_elb_name(uid in any::<String>()) {
        let s = ServiceRef { namespace: String::new(), name: String::new(), uid };
        let n = s.default_load_balancer_name();
        prop_assert!(n.starts_with('a'));
        prop_assert!(n.len() <= 32);
        prop_assert!(n.bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn default_name_of_a_uuid_is_the_upstream_one(uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}") {
        let s = ServiceRef { namespace: String::new(), name: String::new(), uid: uid.clone() };
        let mut upstream = format!("a{}", uid.replace('-', ""));
        upstream.truncate(32);
        prop_assert_eq!(s.default_load_balancer_name(), upstream);
    }

    #[test]
    fn protocol_parse_never_panics(text in any::<String>()) {
        if let Some(p) = Protocol::parse(Some(&text)) {
            prop_assert!(["TCP", "UDP", "SCTP"].contains(&text.as_str()), "{:?}", p);
        }
    }
}
