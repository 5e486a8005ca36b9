//! Go `time.Duration` text (`5m0s`, `300ms`, `1h30m`), as upstream flags take it and print it.

use std::time::Duration;

/// Longest duration accepted, in seconds (about 31 years): far beyond any sensible period, and
/// safely below what `Instant + Duration` can hold.
pub const MAX_SECONDS: u64 = 1_000_000_000;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Fraction digits beyond this many are ignored (as Go does once they stop mattering).
const MAX_FRACTION_DIGITS: u32 = 18;

/// A unit's length in nanoseconds; Go's unit names, with both spellings of micro.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        _ => return None,
    })
}

/// Parses a Go duration string such as `1h30m`, `1.5s` or `250ms`.
///
/// As Go: a sequence of decimal numbers, each with an optional fraction and a unit (`ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`); an optional leading `+`; a bare `0`. Negative durations are
/// refused (no flag takes one), and so is anything longer than [`MAX_SECONDS`]. Arithmetic is
/// exact to the nanosecond.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let err = |why: &str| format!("invalid duration {:?}: {why}", shown(text));
    let s = text.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    if s.is_empty() {
        return Err(err("want e.g. 10s, 5m0s, 1h30m, 250ms"));
    }
    let max = u128::from(MAX_SECONDS) * NANOS_PER_SEC;
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_digits, after) = rest.split_at(int_len);
        let (frac_digits, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len())),
            None => ("", after),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(err("want a number before each unit"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(err("missing unit (ns, us, ms, s, m or h)"));
        }
        let unit = unit_nanos(unit).ok_or_else(|| {
            err(&format!(
                "unknown unit {:?} (ns, us, ms, s, m or h)",
                shown(unit)
            ))
        })?;
        let out_of_range = || err(&format!("longer than {MAX_SECONDS} seconds"));
        // Leading zeros cannot overflow; any more than 20 significant digits certainly does.
        let int_digits = int_digits.trim_start_matches('0');
        if int_digits.len() > 20 {
            return Err(out_of_range());
        }
        let whole: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| out_of_range())?
        };
        let mut fraction: u128 = 0;
        let mut scale: u128 = 1;
        for d in frac_digits.bytes().take(MAX_FRACTION_DIGITS as usize) {
            fraction = fraction * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        let value = whole
            .checked_mul(unit)
            .and_then(|v| v.checked_add(fraction * unit / scale))
            .and_then(|v| v.checked_add(total))
            .filter(|v| *v <= max)
            .ok_or_else(out_of_range)?;
        total = value;
        rest = after;
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).expect("bounded by MAX_SECONDS");
    let nanos = u32::try_from(total % NANOS_PER_SEC).expect("below one second");
    Ok(Duration::new(secs, nanos))
}

/// Formats as Go's `Duration.String()`: `0s`, `250ms`, `1.5µs`, `1m30s`, `2h0m0s`.
pub fn format_go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_string();
    }
    if ns < NANOS_PER_SEC {
        let (unit, scale) = match ns {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("\u{b5}s", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(ns, scale));
    }
    let minutes = ns / (60 * NANOS_PER_SEC);
    let (hours, minutes) = (minutes / 60, minutes % 60);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&decimal(ns % (60 * NANOS_PER_SEC), NANOS_PER_SEC));
    out.push('s');
    out
}

/// `value / scale` in decimal, without trailing zeros in the fraction (`scale` a power of ten).
fn decimal(value: u128, scale: u128) -> String {
    let (whole, frac) = (value / scale, value % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// At most 100 characters of user text, for error messages.
fn shown(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod proptests;

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
            ("+5s", 5.0),
            (".5s", 0.5),
            ("1.s", 1.0),
            ("1µs", 1e-6),
            ("1μs", 1e-6),
            ("2us", 2e-6),
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
        for text in [
            "", "5", "-1s", "5x", "s", "1..2s", "1e400h", ".s", "1.5", "+", "-0s", "1s-", "1 s",
        ] {
            assert!(parse_go_duration(text).is_err(), "{text}");
        }
    }

    #[test]
    fn is_exact_to_the_nanosecond() {
        // Regression: the sum was kept in an f64, so long durations lost their nanoseconds
        // (`100000h0.000000001s` came back as a round 360000000s).
        assert_eq!(
            parse_go_duration("100000h0.000000001s").unwrap(),
            Duration::new(360_000_000, 1)
        );
        assert_eq!(
            parse_go_duration("277000h1ns").unwrap(),
            Duration::new(997_200_000, 1)
        );
        // Fractions are cut, not rounded, at the nanosecond (as Go does).
        assert_eq!(
            parse_go_duration("1.0000000019s").unwrap(),
            Duration::new(1, 1)
        );
    }

    #[test]
    fn refuses_out_of_range_without_overflow() {
        let long = format!("{}s", "9".repeat(40));
        assert!(parse_go_duration(&long)
            .unwrap_err()
            .contains("longer than"));
        assert!(parse_go_duration("1000000001s").is_err());
        assert!(parse_go_duration("1000000000s").is_ok());
        assert!(parse_go_duration(&format!("{}1s", "0".repeat(100))).is_ok());
        assert!(parse_go_duration("999999999h").is_err());
    }

    #[test]
    fn errors_quote_at_most_100_characters() {
        let e = parse_go_duration(&"x".repeat(10_000)).unwrap_err();
        assert!(e.len() < 300, "{e}");
    }

    #[test]
    fn formats_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_500), "1.5\u{b5}s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(5400), "1h30m0s"),
            (Duration::new(3600, 1), "1h0m0.000000001s"),
        ];
        for (d, text) in cases {
            assert_eq!(format_go_duration(d), text, "{d:?}");
        }
    }
}
