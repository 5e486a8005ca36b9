//! Go-style TCP listen addresses as the sidecars' `--http-endpoint` takes them (`:9808`,
//! `10.0.0.5:9808`, `[::1]:9808`, `localhost:9808`): an empty host listens on every interface.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What an address must look like, for error messages.
const EXPECTED: &str = "expected host:port, e.g. :9808 or 10.0.0.5:9808";

/// Parses a listen address. The host is empty (every interface), an IP literal (IPv6 in
/// brackets) or `localhost`; names are not resolved.
pub fn parse_listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} has no port ({EXPECTED})"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{text:?}: port {port:?} is not a number from 0 to 65535"))?;
    let ip = match host {
        "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        other => other
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(other)
            .parse()
            .map_err(|_| format!("{text:?}: host {other:?} is not an IP address ({EXPECTED})"))?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// The address of `--health-port` alone: every interface, that port.
pub fn every_interface(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        // Parsing only: nothing here binds. An empty host means every interface, as in Go.
        let ok = [
            (":9808".to_string(), every_interface(9808)),
            ("10.0.0.5:9808".into(), "10.0.0.5:9808".parse().unwrap()),
            ("[::1]:9809".into(), "[::1]:9809".parse().unwrap()),
            ("localhost:80".into(), "127.0.0.1:80".parse().unwrap()),
            (every_interface(0).to_string(), every_interface(0)),
        ];
        for (text, want) in ok {
            assert_eq!(parse_listen_address(&text), Ok(want), "{text}");
        }
        let bad = [
            ("9808", "has no port"),
            (":http", "is not a number"),
            (":70000", "is not a number"),
            (
                "$(HOST_IP):9808",
                "host \"$(HOST_IP)\" is not an IP address",
            ),
            ("example.com:9808", "is not an IP address"),
            ("", "has no port"),
        ];
        for (text, want) in bad {
            let err = parse_listen_address(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
