//! Security-group ingress rules as plain values: what a load balancer's group must allow, and
//! the difference between two rule sets.

use std::collections::BTreeSet;

use stratus_cloud::Cidr;

/// All addresses, the default of `loadBalancerSourceRanges`.
pub const ANYWHERE_V4: &str = "0.0.0.0/0";

/// One ingress rule with an address range as its source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CidrRule {
    /// `tcp`, `udp`, `icmp`, `icmpv6` or `-1` (all).
    pub protocol: String,
    /// Port range for tcp/udp; ICMP type and code for icmp.
    pub from: i32,
    /// Last port of the range.
    pub to: i32,
    /// IPv4 or IPv6 CIDR.
    pub cidr: String,
    /// Rule description (empty when none), how shared groups' rules are found again.
    pub description: String,
}

impl CidrRule {
    /// Whether the source range is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.cidr.contains(':')
    }
}

/// One ingress rule whose source is another security group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupRule {
    /// `tcp`, `udp`, `icmp` or `-1`.
    pub protocol: String,
    /// First port of the range.
    pub from: i32,
    /// Last port of the range.
    pub to: i32,
    /// The group traffic may come from.
    pub source_group: String,
    /// The rule's description (marks rules we own).
    pub description: String,
}

/// Most distinct source ranges one load balancer accepts.
///
/// Each range is at least one ingress rule in one security group (a Classic ELB's own group
/// holds one per listener port and range plus one for path-MTU discovery; an NLB's ranges are
/// rules in the node groups), and AWS allows 60 inbound rules per group and address family by
/// default. A Service with more ranges than that cannot be applied with default quotas, so it
/// is refused before any AWS call instead of failing half-way through.
pub const MAX_SOURCE_RANGES: usize = 60;

/// Source ranges of a load balancer: the Service's, normalised as Go prints them (`10.0.0.1/8`
/// is `10.0.0.0/8`) and deduplicated, or everywhere. Call [`check_source_ranges`] first.
pub fn source_ranges(requested: &[String]) -> Vec<String> {
    let mut out: Vec<String> = requested
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| Cidr::parse(s).map_or_else(|_| s.to_string(), |c| c.to_string()))
        .collect();
    if out.is_empty() {
        out.push(ANYWHERE_V4.to_string());
    }
    out.sort();
    out.dedup();
    out
}

/// The client ranges of a network load balancer's node rules: the Service's source ranges, or,
/// when those are open to everywhere (none given, or exactly `0.0.0.0/0`) and `allow_list`
/// (`[Global] PublicNetworkAllowList`, Deckhouse's) is not empty, the allow list instead.
pub fn client_ranges(requested: &[String], allow_list: &[String]) -> Vec<String> {
    let ranges = source_ranges(requested);
    if ranges == [ANYWHERE_V4] && !allow_list.is_empty() {
        source_ranges(allow_list)
    } else {
        ranges
    }
}

/// Rules of a Classic ELB's own group: every listener port from every source range, plus ICMP
/// "fragmentation needed" (type 3, code 4) so path-MTU discovery works through the ELB.
pub fn listener_rules(ports: &[u16], ranges: &[String]) -> BTreeSet<CidrRule> {
    let mut out = BTreeSet::new();
    for cidr in ranges {
        for port in ports {
            out.insert(CidrRule {
                protocol: "tcp".into(),
                from: i32::from(*port),
                to: i32::from(*port),
                cidr: cidr.clone(),
                description: String::new(),
            });
        }
        let icmp = if cidr.contains(':') { "icmpv6" } else { "icmp" };
        out.insert(CidrRule {
            protocol: icmp.into(),
            from: 3,
            to: 4,
            cidr: cidr.clone(),
            description: String::new(),
        });
    }
    out
}

/// What to add and what to remove to turn `current` into `desired`.
pub fn diff<T: Ord + Clone>(current: &BTreeSet<T>, desired: &BTreeSet<T>) -> (Vec<T>, Vec<T>) {
    let add = desired.difference(current).cloned().collect();
    let remove = current.difference(desired).cloned().collect();
    (add, remove)
}

/// Validates source ranges before they reach AWS: each must be an IPv4 or IPv6 CIDR, and
/// there may be at most [`MAX_SOURCE_RANGES`] distinct ones.
pub fn check_source_ranges(ranges: &[String]) -> Result<(), String> {
    let mut distinct = BTreeSet::new();
    for r in ranges.iter().map(|r| r.trim()).filter(|r| !r.is_empty()) {
        let cidr = Cidr::parse(r).map_err(|e| format!("loadBalancerSourceRanges: {e}"))?;
        distinct.insert(cidr);
    }
    if distinct.len() > MAX_SOURCE_RANGES {
        return Err(format!(
            "loadBalancerSourceRanges: {} ranges given, at most {MAX_SOURCE_RANGES} are accepted (each is a rule in a security group, which holds 60 inbound rules by default)",
            distinct.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_range_is_everywhere_and_ranges_are_deduplicated() {
        assert_eq!(source_ranges(&[]), vec![ANYWHERE_V4]);
        let allow = ["10.1.0.0/16".to_string(), "192.0.2.7/32".to_string()];
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(client_ranges(&[], &allow), allow.to_vec());
        assert_eq!(client_ranges(&v(&["0.0.0.0/0"]), &allow), allow.to_vec());
        assert_eq!(
            client_ranges(&v(&["203.0.113.0/24"]), &allow),
            v(&["203.0.113.0/24"])
        );
        assert_eq!(
            client_ranges(&v(&["0.0.0.0/0", "203.0.113.0/24"]), &allow),
            v(&["0.0.0.0/0", "203.0.113.0/24"])
        );
        assert_eq!(client_ranges(&[], &[]), vec![ANYWHERE_V4]);
        assert_eq!(
            source_ranges(&["10.0.0.0/8".into(), " 10.0.0.0/8 ".into()]),
            vec!["10.0.0.0/8"]
        );
    }

    #[test]
    fn listener_rules_cover_every_port_and_mtu_discovery() {
        let rules = listener_rules(&[80, 443], &["10.0.0.0/8".into(), "2001:db8::/32".into()]);
        assert_eq!(rules.len(), 6);
        assert!(rules.contains(&CidrRule {
            protocol: "icmpv6".into(),
            from: 3,
            to: 4,
            cidr: "2001:db8::/32".into(),
            description: String::new(),
        }));
        assert!(rules.iter().filter(|r| r.protocol == "tcp").count() == 4);
    }

    #[test]
    fn diff_finds_both_sides() {
        let a: BTreeSet<i32> = [1, 2, 3].into();
        let b: BTreeSet<i32> = [2, 3, 4].into();
        assert_eq!(diff(&a, &b), (vec![4], vec![1]));
    }

    #[test]
    fn source_ranges_are_checked() {
        assert!(check_source_ranges(&["10.0.0.0/8".into(), "::/0".into()]).is_ok());
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "foo/8",
            "::/129",
            "10.0.0.0/+8",
            "10.0.0.0/ 8",
        ] {
            assert!(check_source_ranges(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sign_in_the_prefix_is_refused() {
        // Regression: `"+8".parse::<u8>()` is Ok, so `10.0.0.0/+8` passed the check and only
        // failed at AWS, after the load balancer had been created.
        let e = check_source_ranges(&["10.0.0.0/+8".into()]).unwrap_err();
        assert!(e.contains("10.0.0.0/+8"), "{e}");
    }

    #[test]
    fn ranges_are_normalised_before_deduplication() {
        assert_eq!(
            source_ranges(&["10.1.2.3/8".into(), "10.0.0.0/8".into(), "FD00::1/8".into()]),
            vec!["10.0.0.0/8", "fd00::/8"]
        );
    }

    #[test]
    fn too_many_ranges_are_refused() {
        let ranges: Vec<String> = (0..=MAX_SOURCE_RANGES)
            .map(|i| format!("10.{i}.0.0/16"))
            .collect();
        let e = check_source_ranges(&ranges).unwrap_err();
        assert!(e.contains("61 ranges given, at most 60"), "{e}");
        assert!(check_source_ranges(&ranges[..MAX_SOURCE_RANGES]).is_ok());
        // Duplicates (after normalisation) count once.
        let same: Vec<String> = (0..500).map(|i| format!("10.0.{}.0/8", i % 256)).collect();
        assert!(check_source_ranges(&same).is_ok());
    }
}
