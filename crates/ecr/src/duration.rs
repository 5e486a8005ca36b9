//! `cacheDuration`: half a token's remaining lifetime, written as a Go duration string
//! (`"5h59m30s"`, `"0s"`), which is how the kubelet parses `metav1.Duration`.

/// Half the time left until `expires_at` (Unix seconds) at `now` (Unix seconds), in whole
/// seconds; 0 when there is no expiry or it has passed.
pub fn cache_seconds(expires_at: Option<i64>, now: i64) -> u64 {
    match expires_at {
        Some(expires_at) if expires_at > now => (expires_at - now) as u64 / 2,
        _ => 0,
    }
}

/// Formats whole seconds like Go's `time.Duration.String`: `0s`, `45s`, `1m0s`, `6h0m0s`.
pub fn go_duration(seconds: u64) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn go_strings() {
        for (secs, want) in [
            (0, "0s"),
            (1, "1s"),
            (59, "59s"),
            (60, "1m0s"),
            (61, "1m1s"),
            (3600, "1h0m0s"),
            (3661, "1h1m1s"),
            (21_570, "5h59m30s"),
            (43_200, "12h0m0s"),
            (100 * 3600, "100h0m0s"),
        ] {
            assert_eq!(go_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn half_the_remaining_lifetime() {
        let now = 1_700_000_000;
        assert_eq!(cache_seconds(Some(now + 12 * 3600), now), 6 * 3600);
        assert_eq!(cache_seconds(Some(now + 3), now), 1);
        assert_eq!(cache_seconds(Some(now + 1), now), 0);
    }

    #[test]
    fn zero_when_expired_or_without_expiry() {
        let now = 1_700_000_000;
        assert_eq!(cache_seconds(None, now), 0);
        assert_eq!(cache_seconds(Some(now), now), 0);
        // moto's fixed expiry, 2015-01-01.
        assert_eq!(cache_seconds(Some(1_420_070_400), now), 0);
    }

    /// Parses a Go duration made only of h/m/s parts back into seconds.
    fn parse_go(s: &str) -> u64 {
        let mut total = 0;
        let mut number = 0;
        for c in s.chars() {
            match c {
                '0'..='9' => number = number * 10 + c.to_digit(10).unwrap() as u64,
                'h' => (total, number) = (total + number * 3600, 0),
                'm' => (total, number) = (total + number * 60, 0),
                's' => (total, number) = (total + number, 0),
                _ => panic!("unexpected {c} in {s}"),
            }
        }
        total
    }

    proptest! {
        #[test]
        fn go_strings_round_trip(secs in 0u64..10_000_000) {
            prop_assert_eq!(parse_go(&go_duration(secs)), secs);
        }

        #[test]
        fn never_more_than_half(now in 0i64..2_000_000_000, left in -100_000i64..100_000) {
            let half = cache_seconds(Some(now + left), now);
            prop_assert!(half as i64 * 2 <= left.max(0));
        }
    }
}
