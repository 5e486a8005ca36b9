//! The one exponential backoff of Stratus: a delay that doubles per failure from `base` up to
//! `max`, optionally with jitter so that callers that failed together do not retry together.

use std::time::Duration;

/// Doubling delays between `base` and `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// Delays from `base` doubling up to `max`.
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max }
    }

    /// The same backoff with its longest delay cut to `cap` (never below `base`).
    pub fn capped(self, cap: Duration) -> Backoff {
        Backoff {
            base: self.base,
            max: self.max.min(cap).max(self.base),
        }
    }

    /// The delay after failure number `failures` (1 for the first failure; 0 counts as 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << doublings).min(self.max)
    }

    /// [`Backoff::delay`] with "equal jitter": a random point in its upper half.
    pub fn jittered(&self, failures: u32) -> Duration {
        let full = self.delay(failures);
        full.mul_f64(0.5 + rand::random::<f64>() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_base_to_max() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let delays: Vec<u64> = (1..=7).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.delay(0), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(30));
        assert_eq!(
            b.capped(Duration::from_secs(15)).delay(9),
            Duration::from_secs(15)
        );
        assert_eq!(
            b.capped(Duration::ZERO).delay(9),
            Duration::from_secs(1),
            "never below base"
        );
    }

    #[test]
    fn jitter_stays_in_the_upper_half() {
        let b = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        for n in 1..20 {
            let d = b.jittered(n);
            assert!(d <= b.delay(n) && d >= b.delay(n) / 2, "{n}: {d:?}");
        }
    }
}
