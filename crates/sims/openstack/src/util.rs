//! Small helpers: ids, MAC addresses, timestamps in each service's format, query lists.

use std::time::{SystemTime, UNIX_EPOCH};

/// A new hyphenated UUID (the id format of every simulated resource).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A MAC address in OpenStack's `fa:16:3e` range.
pub fn new_mac() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    format!("fa:16:3e:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn parts(secs: i64) -> (i32, u8, u8, u8, u8, u8) {
    let t =
        time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    (
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
    )
}

/// `2026-01-02T03:04:05Z` (Nova, Neutron, Glance).
pub fn iso_z(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = parts(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `2026-01-02T03:04:05.000000` (Cinder).
pub fn iso_micro(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = parts(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.000000")
}

/// `2026-01-02T03:04:05` (Octavia).
pub fn iso_plain(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = parts(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
}

/// Parses an ISO 8601 time as the APIs accept it in `changes-since`: with or without a zone
/// (no zone means UTC) and fraction.
pub fn parse_time(text: &str) -> Option<i64> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = time::OffsetDateTime::parse(text, &Rfc3339) {
        return Some(t.unix_timestamp());
    }
    let with_zone = format!("{}Z", text.trim_end_matches('Z'));
    time::OffsetDateTime::parse(&with_zone, &Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// Every value of `key` in a query list.
pub fn values<'a>(query: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    query
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The first value of `key` in a query list.
pub fn first<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_and_parse_in_every_format() {
        let t = 1_767_323_045; // 2026-01-02T03:04:05Z
        assert_eq!(iso_z(t), "2026-01-02T03:04:05Z");
        assert_eq!(iso_micro(t), "2026-01-02T03:04:05.000000");
        assert_eq!(iso_plain(t), "2026-01-02T03:04:05");
        assert_eq!(parse_time("2026-01-02T03:04:05Z"), Some(t));
        assert_eq!(parse_time("2026-01-02T03:04:05"), Some(t));
        assert_eq!(parse_time("2026-01-02T03:04:05.123456"), Some(t));
        assert_eq!(parse_time("2026-01-02T05:04:05+02:00"), Some(t));
        assert_eq!(parse_time("yesterday"), None);
        assert!(new_mac().starts_with("fa:16:3e:"));
    }
}

/// Decodes a raw query string into its pairs, in order (`+` is a space, `%XX` a byte).
pub fn parse_query(raw: Option<&str>) -> Vec<(String, String)> {
    raw.unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push((hi * 16 + lo) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod query_tests {
    use super::*;

    #[test]
    fn queries_decode_in_order_with_repeats() {
        let q = parse_query(Some(
            "name=%5Enode%201%24&id=a&id=b&x=1+2&fixed_ips=ip_address%3D10.0.0.5&bad=%zz&e",
        ));
        assert_eq!(values(&q, "id"), ["a", "b"]);
        assert_eq!(first(&q, "name"), Some("^node 1$"));
        assert_eq!(first(&q, "x"), Some("1 2"));
        assert_eq!(first(&q, "fixed_ips"), Some("ip_address=10.0.0.5"));
        assert_eq!(first(&q, "bad"), Some("%zz"));
        assert_eq!(first(&q, "e"), Some(""));
        assert!(parse_query(None).is_empty());
    }
}
