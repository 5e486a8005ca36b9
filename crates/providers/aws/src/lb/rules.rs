//! Security-group ingress rules as plain values: what a load balancer's group must allow, and
//! the difference between two rule sets.

use std::collections::BTreeSet;

/// All addresses, the default of `loadBalancerSourceRanges`.
pub const ANYWHERE_V4: &str = "0.0.0.0/0";

/// One ingress rule with an address range as its source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CidrRule {
    /// `tcp`, `udp`, `icmp`, `icmpv6` or `-1` (all).
    pub protocol: String,
    /// Port range for tcp/udp; ICMP type and code for icmp.
    pub from: i32,
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
    pub protocol: String,
    pub from: i32,
    pub to: i32,
    pub source_group: String,
    pub description: String,
}

/// Source ranges of a load balancer: the Service's, or everywhere.
pub fn source_ranges(requested: &[String]) -> Vec<String> {
    let mut out: Vec<String> = requested
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if out.is_empty() {
        out.push(ANYWHERE_V4.to_string());
    }
    out.sort();
    out.dedup();
    out
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

/// Validates source ranges before they reach AWS: each must be an IPv4 or IPv6 CIDR.
pub fn check_source_ranges(ranges: &[String]) -> Result<(), String> {
    for r in ranges {
        let r = r.trim();
        let Some((addr, len)) = r.split_once('/') else {
            return Err(format!(
                "loadBalancerSourceRanges: {r:?} is not a CIDR (want e.g. 10.0.0.0/8)"
            ));
        };
        let max = match addr.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(_)) => 32,
            Ok(std::net::IpAddr::V6(_)) => 128,
            Err(_) => {
                return Err(format!(
                    "loadBalancerSourceRanges: {r:?} has an invalid address"
                ))
            }
        };
        match len.parse::<u8>() {
            Ok(n) if n <= max => {}
            _ => {
                return Err(format!(
                    "loadBalancerSourceRanges: {r:?} has an invalid prefix length"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_range_is_everywhere_and_ranges_are_deduplicated() {
        assert_eq!(source_ranges(&[]), vec![ANYWHERE_V4]);
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
        for bad in ["10.0.0.0", "10.0.0.0/33", "foo/8", "::/129"] {
            assert!(check_source_ranges(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
