//! Kubernetes quantities as the platform reports disk sizes (`10Gi`, `1073741824`, `500M`),
//! read into bytes (pure). Fractions and exponents are not used for disk sizes and are refused.

/// Bytes in a quantity string, `None` when it is not a whole-number size.
pub fn parse_bytes(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let n: i64 = number.parse().ok()?;
    let factor: i64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases = [
            ("1073741824", Some(1 << 30)),
            ("10Gi", Some(10 << 30)),
            ("512Mi", Some(512 << 20)),
            ("2G", Some(2_000_000_000)),
            ("", None),
            ("1.5Gi", None),
            ("1e9", None),
            ("Gi", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_bytes(text), want, "{text}");
        }
    }
}
