//! Label values from cloud strings (zone, host ID), sanitised as upstream does: invalid
//! characters become `-`, the value starts and ends alphanumeric, at most 63 characters.

/// A valid label value made from `raw` (empty when nothing usable remains).
pub fn sanitize(raw: &str) -> String {
    let mapped: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let cut: String = trimmed.chars().take(63).collect();
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Whether `value` is a valid label value as it is.
pub fn is_valid(value: &str) -> bool {
    sanitize(value) == value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_like_upstream() {
        assert_eq!(sanitize("nova"), "nova");
        assert_eq!(sanitize("zone a/b"), "zone-a-b");
        assert_eq!(sanitize("-_x_-"), "x");
        assert_eq!(sanitize(&"a".repeat(100)).len(), 63);
        assert_eq!(sanitize("é"), "");
        assert!(is_valid("m1.small") && !is_valid("m1 small"));
    }
}
