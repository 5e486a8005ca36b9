//! Checks for single config values: booleans, AWS region and zone names, ports, paths, URLs.

use std::sync::LazyLock;

use regex::Regex;

/// Region name body: a partition-ish prefix of lowercase words (`us`, `us-gov`, `us-isob`,
/// `eusc-de`, ...), a compass direction, and a number.
const REGION: &str = r"[a-z]{2,}(?:-[a-z]+){0,2}-(?:north|south|east|west|central|northeast|northwest|southeast|southwest)-[1-9][0-9]?";

static REGION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{REGION}$")).expect("region pattern compiles"));

/// Zone: region plus AZ letters (`us-east-1a`), or plus dash-separated groups for local and
/// wavelength zones (`us-west-2-lax-1a`, `us-east-1-wl1-bos-wlz-1`).
static ZONE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^({REGION})(?:[a-z]+|(?:-[a-z0-9]+)+)$")).expect("zone pattern compiles")
});

/// Whether `name` has the shape of an AWS region name (`us-east-1`, `us-gov-west-1`, ...).
pub(crate) fn is_region(name: &str) -> bool {
    REGION_RE.is_match(name)
}

/// The region of a well-formed zone name (`us-east-1a` and `us-east-1-bos-1a` are in
/// `us-east-1`); `None` when `zone` is not a zone name.
pub(crate) fn zone_region(zone: &str) -> Option<&str> {
    ZONE_RE
        .captures(zone)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// Reads a port as gcfg reads an int32 (decimal, or hex with `0x`); 0 is returned as is.
pub(crate) fn parse_port(value: &str) -> Result<u16, String> {
    let (digits, radix) = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => (hex, 16),
        None => (value, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err("is not a port number between 1 and 65535".to_owned());
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    u16::from_str_radix(significant, radix)
        .map_err(|_| "is not a port between 1 and 65535".to_owned())
}

/// Checks an HTTP health probe path: starts with `/`, at most 1024 characters (the ELB limit),
/// no whitespace or control characters.
pub(crate) fn check_probe_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("must start with '/'");
    }
    if path.chars().count() > 1024 {
        return Err("must be at most 1024 characters long");
    }
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters");
    }
    Ok(())
}

/// Checks an endpoint URL: `http://` or `https://`, a host, an optional port, no credentials.
pub(crate) fn check_endpoint_url(url: &str) -> Result<(), &'static str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("must be an absolute http:// or https:// URL");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err("must use the http or https scheme");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters");
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Err("must not contain user credentials");
    }
    let (host, port) = split_host_port(authority)?;
    if host.is_empty() {
        return Err("must name a host");
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':'))
    {
        return Err("has invalid characters in its host");
    }
    match port {
        Some(p) if !matches!(parse_decimal_port(p), Some(1..)) => {
            Err("has a port that is not between 1 and 65535")
        }
        _ => Ok(()),
    }
}

/// Splits `host[:port]` or `[v6]:port`.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), &'static str> {
    if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("has an unterminated IPv6 host")?;
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err("has text after its IPv6 host"),
            },
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// A port made of 1–5 decimal digits.
fn parse_decimal_port(port: &str) -> Option<u16> {
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    port.parse().ok()
}

/// Checks that `pattern` compiles as a regular expression; the error is cut to one line.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), String> {
    Regex::new(pattern).map(drop).map_err(|e| {
        let text = e.to_string();
        let last = text.lines().last().unwrap_or_default();
        let reason = last.trim().trim_start_matches("error: ");
        format!("is not a valid regular expression: {reason}")
    })
}

/// Service names compare case-, space- and dash-insensitively, with aliases folded: `elb` and
/// `elasticloadbalancing` (and the Go SDK v2 service ID `Elastic Load Balancing`) are one
/// service, as are `elbv2`/`elasticloadbalancingv2` and `imds`/`ec2metadata`/`ec2imds`.
pub(crate) fn canonical_service(service: &str) -> String {
    let squashed: String = service
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect();
    match squashed.as_str() {
        "elb" => "elasticloadbalancing".to_owned(),
        "elbv2" => "elasticloadbalancingv2".to_owned(),
        "ec2metadata" | "ec2imds" => "imds".to_owned(),
        _ => squashed,
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    use stratus_cloud_kit::gcfg::parse_bool;

    #[test]
    fn booleans_accept_gcfg_spellings_in_any_case() {
        for v in ["true", "YES", "On", "1"] {
            assert_eq!(parse_bool(v), Some(true), "{v}");
        }
        for v in ["false", "No", "OFF", "0"] {
            assert_eq!(parse_bool(v), Some(false), "{v}");
        }
        for v in ["", "2", "y", "tru", "enabled"] {
            assert_eq!(parse_bool(v), None, "{v}");
        }
    }

    #[test]
    fn region_names() {
        let valid = [
            "us-east-1",
            "eu-central-2",
            "ap-southeast-4",
            "cn-northwest-1",
            "us-gov-west-1",
            "us-iso-east-1",
            "us-isob-east-1",
            "eu-isoe-west-1",
            "us-isof-south-1",
            "il-central-1",
            "mx-central-1",
            "ca-west-1",
            "eusc-de-east-1",
            "me-south-1",
            "af-south-1",
        ];
        for r in valid {
            assert!(is_region(r), "{r} should be valid");
        }
        let invalid = [
            "",
            "moon-1",
            "us-east",
            "us-east-1a",
            "US-EAST-1",
            "us-east-0",
            "us-east-123",
            "us_east_1",
            " us-east-1",
            "us-up-1",
            "u-east-1",
            "a-b-c-d-east-1",
        ];
        for r in invalid {
            assert!(!is_region(r), "{r:?} should be invalid");
        }
    }

    #[test]
    fn zone_names_and_their_regions() {
        let cases = [
            ("us-east-1a", Some("us-east-1")),
            ("eu-central-2bb", Some("eu-central-2")),
            ("us-gov-west-1b", Some("us-gov-west-1")),
            ("us-west-2-lax-1a", Some("us-west-2")),
            ("us-east-1-wl1-bos-wlz-1", Some("us-east-1")),
            ("us-east-1", None),
            ("us-east-1A", None),
            ("us-east-1-", None),
            ("moon-1a", None),
            ("", None),
        ];
        for (zone, region) in cases {
            assert_eq!(zone_region(zone), region, "{zone:?}");
        }
    }

    #[test]
    fn ports() {
        assert_eq!(parse_port("10256"), Ok(10256));
        assert_eq!(parse_port("0x2810"), Ok(10256));
        assert_eq!(parse_port("0"), Ok(0));
        assert_eq!(parse_port("000080"), Ok(80));
        for bad in [
            "",
            "-1",
            "+80",
            "65536",
            "99999999999999999999999",
            "0x",
            "0xfffff",
            "8o",
        ] {
            assert!(parse_port(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn probe_paths() {
        assert!(check_probe_path("/healthz").is_ok());
        assert!(check_probe_path("/").is_ok());
        assert!(check_probe_path("healthz").is_err());
        assert!(check_probe_path("/a b").is_err());
        assert!(check_probe_path(&format!("/{}", "a".repeat(1024))).is_err());
    }

    #[test]
    fn endpoint_urls() {
        for ok in [
            "https://ec2.us-east-1.amazonaws.com",
            "http://localhost:4566/",
            "HTTPS://vpce-1.ec2.example.internal/path?x=1",
            "https://[::1]:8443",
            "https://10.0.0.1",
        ] {
            assert_eq!(check_endpoint_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "ec2.amazonaws.com",
            "ftp://host",
            "https://",
            "https:///path",
            "https://user:pw@host",
            "https://host:0",
            "https://host:99999",
            "https://host:",
            "https://ho st",
            "https://[::1",
            "https://host/a b",
        ] {
            assert!(check_endpoint_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn patterns_report_one_line_errors() {
        assert!(check_pattern(r"^[a-z]+\.metal$").is_ok());
        let err = check_pattern("a(").unwrap_err();
        assert!(!err.contains('\n'));
        assert!(err.contains("unclosed group"), "{err}");
    }

    #[test]
    fn service_aliases_fold() {
        assert_eq!(canonical_service("ELB"), "elasticloadbalancing");
        assert_eq!(
            canonical_service("Elastic Load Balancing"),
            "elasticloadbalancing"
        );
        assert_eq!(
            canonical_service("Elastic Load Balancing v2"),
            "elasticloadbalancingv2"
        );
        assert_eq!(canonical_service("elbv2"), "elasticloadbalancingv2");
        assert_eq!(canonical_service("EC2"), "ec2");
        assert_eq!(canonical_service("Auto Scaling"), "autoscaling");
        assert_eq!(canonical_service("ec2metadata"), "imds");
    }
}
