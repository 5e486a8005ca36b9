//! Property tests of the Go duration parser: no panic on any text, exact round-trips through
//! the Go formatter, and sums of generated components.

use super::*;
use proptest::prelude::*;

/// Any duration the parser accepts, to the nanosecond.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..=MAX_SECONDS, 0u32..1_000_000_000).prop_map(|(s, n)| {
            if s == MAX_SECONDS {
                Duration::from_secs(s)
            } else {
                Duration::new(s, n)
            }
        }),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (0u64..100_000).prop_map(Duration::from_secs),
    ]
}

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Text made of duration-ish characters.
fn duration_soup() -> impl Strategy<Value = String> {
    "[0-9.+ -]{0,6}([0-9]{0,25}(\\.[0-9]{0,25})?(ns|us|µs|μs|ms|s|m|h|x|)){0,5}"
}

proptest! {
    #[test]
    fn parse_never_panics(text in any::<String>()) {
        if let Err(e) = parse_go_duration(&text) {
            prop_assert!(e.starts_with("invalid duration"));
            prop_assert!(e.chars().count() < 400);
        }
    }

    #[test]
    fn parse_never_panics_on_near_misses(text in duration_soup()) {
        if let Ok(d) = parse_go_duration(&text) {
            prop_assert!(d <= Duration::from_secs(MAX_SECONDS));
        }
    }

    #[test]
    fn go_format_round_trips(d in duration()) {
        let text = format_go_duration(d);
        prop_assert_eq!(parse_go_duration(&text), Ok(d), "{}", text);
    }

    #[test]
    fn components_add_up_exactly(parts in prop::collection::vec((0u64..10_000, prop::sample::select(UNITS)), 1..6)) {
        let text: String = parts.iter().map(|(n, (u, _))| format!("{n}{u}")).collect();
        let want: u128 = parts.iter().map(|(n, (_, ns))| u128::from(*n) * ns).sum();
        let got = parse_go_duration(&text).map_err(TestCaseError::fail)?;
        prop_assert_eq!(got.as_nanos(), want, "{}", text);
    }

    #[test]
    fn fractions_are_cut_at_the_nanosecond(whole in 0u64..1_000_000, frac in "[0-9]{1,30}") {
        let d = parse_go_duration(&format!("{whole}.{frac}s")).unwrap();
        let nine: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
        prop_assert_eq!(d, Duration::new(whole, nine.parse().unwrap()));
    }

    #[test]
    fn reformatting_a_parsed_duration_keeps_its_value(text in duration_soup()) {
        if let Ok(d) = parse_go_duration(&text) {
            prop_assert_eq!(parse_go_duration(&format_go_duration(d)), Ok(d));
        }
    }
}
