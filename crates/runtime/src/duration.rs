//! Go `time.Duration` text (`5m0s`, `300ms`, `1h30m`), as upstream flags take it.

use std::time::Duration;

/// Parses a Go duration string; a bare number is refused (Go refuses it too, except `0`).
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(format!(
            "invalid duration {text:?}: want e.g. 10s, 5m0s, 1h30m, 250ms"
        ));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("invalid duration {text:?}: missing unit"))?;
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("invalid duration {text:?}: unknown unit {u:?}")),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 1e9 {
        return Err(format!("invalid duration {text:?}: out of range"));
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        let cases = [
            ("5m0s", 300.0),
            ("10s", 10.0),
            ("1h30m", 5400.0),
            ("250ms", 0.25),
            ("1.5s", 1.5),
            ("0", 0.0),
        ];
        for (text, secs) in cases {
            assert_eq!(
                parse_go_duration(text).unwrap(),
                Duration::from_secs_f64(secs),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_garbage() {
        for text in ["", "5", "-1s", "5x", "s", "1..2s", "1e400h"] {
            assert!(parse_go_duration(text).is_err(), "{text}");
        }
    }
}
