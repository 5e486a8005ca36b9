//! IP networks in CIDR notation (IPv4 and IPv6), as cluster, pod and route CIDRs are written.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A network: its address (host bits always zero) and prefix length.
///
/// Ordered by family (IPv4 first), then address, then prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a text is not a CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("{0:?} is not a CIDR (want address/prefix, e.g. 10.244.0.0/16 or fd00:10:244::/56)")]
    /// Not `address/prefix`.
    Syntax(String),
    #[error("{input:?}: prefix length {prefix} is longer than {max}")]
    /// A prefix longer than the address family allows.
    PrefixTooLong {
        /// The text.
        input: String,
        /// Its prefix length.
        prefix: u8,
        /// The longest the family allows.
        max: u8,
    },
}

fn width(ipv6: bool) -> u8 {
    if ipv6 {
        128
    } else {
        32
    }
}

/// `bits` with everything after the first `prefix` of `width` bits cleared.
fn mask(bits: u128, prefix: u8, width: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let keep = u128::MAX << (128 - u32::from(prefix));
    let shift = 128 - u32::from(width);
    ((bits << shift) & keep) >> shift
}

impl Cidr {
    /// Parses `address/prefix`. As Go's `net.ParseCIDR`, host bits are cleared
    /// (`10.244.1.7/16` is `10.244.0.0/16`); surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<Cidr, CidrError> {
        let t = text.trim();
        let syntax = || CidrError::Syntax(text.to_string());
        let (addr, prefix) = t.split_once('/').ok_or_else(syntax)?;
        let addr: IpAddr = addr.parse().map_err(|_| syntax())?;
        if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax());
        }
        let prefix: u8 = prefix.parse().map_err(|_| syntax())?;
        Cidr::new(addr, prefix).ok_or(CidrError::PrefixTooLong {
            input: text.to_string(),
            prefix,
            max: width(addr.is_ipv6()),
        })
    }

    /// The network of `addr` with `prefix` bits; `None` when the prefix is too long.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Cidr> {
        let bits = match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        Cidr::from_bits(addr.is_ipv6(), bits, prefix)
    }

    /// The network whose address is `bits` (IPv4 in the low 32 bits); host bits are cleared.
    pub fn from_bits(ipv6: bool, bits: u128, prefix: u8) -> Option<Cidr> {
        let w = width(ipv6);
        if prefix > w {
            return None;
        }
        let net = mask(bits, prefix, w);
        let network = if ipv6 {
            IpAddr::V6(Ipv6Addr::from(net))
        } else {
            IpAddr::V4(Ipv4Addr::from(net as u32))
        };
        Some(Cidr { network, prefix })
    }

    /// Whether this is an IPv6 network.
    pub fn is_ipv6(&self) -> bool {
        self.network.is_ipv6()
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// 32 for IPv4, 128 for IPv6.
    pub fn max_prefix_len(&self) -> u8 {
        width(self.is_ipv6())
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The network address as a number (IPv4 in the low 32 bits).
    pub fn bits(&self) -> u128 {
        match self.network {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        }
    }

    /// Whether `other` lies wholly inside this network (same family, equal or longer prefix).
    pub fn contains(&self, other: &Cidr) -> bool {
        self.is_ipv6() == other.is_ipv6()
            && other.prefix >= self.prefix
            && mask(other.bits(), self.prefix, self.max_prefix_len()) == self.bits()
    }

    /// Whether `ip` is an address of this network.
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        let host = match ip {
            IpAddr::V4(a) => Cidr {
                network: IpAddr::V4(a),
                prefix: 32,
            },
            IpAddr::V6(a) => Cidr {
                network: IpAddr::V6(a),
                prefix: 128,
            },
        };
        self.contains(&host)
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cidr::parse(s)
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn parses_and_normalises() {
        assert_eq!(c("10.244.1.7/16").to_string(), "10.244.0.0/16");
        assert_eq!(c(" 10.244.1.0/24 ").to_string(), "10.244.1.0/24");
        assert_eq!(c("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(c("10.0.0.1/32").to_string(), "10.0.0.1/32");
        assert_eq!(c("FD00:10:244:0001::/64").to_string(), "fd00:10:244:1::/64");
        assert_eq!(c("fd00:10:244:1:2::/56").to_string(), "fd00:10:244::/56");
        assert_eq!(c("::/0").to_string(), "::/0");
        assert!(c("fd00::/8").is_ipv6());
        assert_eq!(c("fd00::/8").max_prefix_len(), 128);
        assert_eq!(c("10.0.0.0/8").max_prefix_len(), 32);
    }

    #[test]
    fn rejects_non_cidrs() {
        for bad in [
            "",
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/x",
            "10.0.0.0/+8",
            "10.0.0/8",
            "nonsense/8",
            "10.0.0.0/8/8",
            "10.0.0.0/0008",
        ] {
            assert!(
                matches!(Cidr::parse(bad), Err(CidrError::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Cidr::parse("10.0.0.0/33"),
            Err(CidrError::PrefixTooLong { max: 32, .. })
        ));
        assert!(matches!(
            Cidr::parse("fd00::/129"),
            Err(CidrError::PrefixTooLong { max: 128, .. })
        ));
    }

    #[test]
    fn containment() {
        let cluster = c("10.244.0.0/16");
        assert!(cluster.contains(&c("10.244.3.0/24")));
        assert!(cluster.contains(&cluster));
        assert!(!cluster.contains(&c("10.245.0.0/24")));
        assert!(!cluster.contains(&c("10.0.0.0/8")));
        assert!(!cluster.contains(&c("fd00::/64")));
        assert!(c("0.0.0.0/0").contains(&c("1.2.3.4/32")));
        assert!(c("10.0.0.0/8").overlaps(&cluster));
        assert!(!c("10.245.0.0/16").overlaps(&cluster));
        let v6 = c("fd00:10:244::/56");
        assert!(v6.contains(&c("fd00:10:244:ff::/64")));
        assert!(!v6.contains(&c("fd00:10:245::/64")));
    }

    #[test]
    fn bits_round_trip() {
        let a = c("10.244.2.0/24");
        assert_eq!(a.bits(), 0x0af4_0200);
        assert_eq!(Cidr::from_bits(false, a.bits(), 24), Some(a));
        assert_eq!(Cidr::from_bits(false, 0x0af4_02ff, 24), Some(a));
        assert_eq!(Cidr::from_bits(false, 0, 33), None);
        let b = c("fd00:10:244:1::/64");
        assert_eq!(Cidr::from_bits(true, b.bits(), 64), Some(b));
    }
}
