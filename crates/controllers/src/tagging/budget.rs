//! Upstream's `--tagging-controller-rate-limit` / `--tagging-controller-burst-limit`: a token
//! bucket over nodes processed (a node tagged or untagged takes one token); pure, time passed in.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket: `burst` nodes at once, `rate` per second sustained.
#[derive(Debug, Clone)]
pub struct Budget {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl Budget {
    /// A full bucket at `now`; `None` unless both are positive (upstream: either at zero turns
    /// the limit off).
    pub fn new(rate: f64, burst: u32, now: Instant) -> Option<Budget> {
        (rate > 0.0 && burst > 0).then(|| Budget {
            rate,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            updated: now,
        })
    }

    fn advance(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
    }

    /// Nodes that may be processed now.
    pub fn available(&mut self, now: Instant) -> usize {
        self.advance(now);
        self.tokens.max(0.0).floor() as usize
    }

    /// Spends `n` tokens.
    pub fn take(&mut self, n: usize, now: Instant) {
        self.advance(now);
        self.tokens -= n as f64;
    }

    /// How long until one more node may be processed.
    pub fn next_in(&self) -> Duration {
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_unless_rate_and_burst_are_positive() {
        let now = Instant::now();
        assert!(Budget::new(0.0, 10, now).is_none());
        assert!(Budget::new(5.0, 0, now).is_none());
        assert!(Budget::new(5.0, 10, now).is_some());
    }

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut b = Budget::new(2.0, 5, t0).unwrap();
        assert_eq!(b.available(t0), 5);
        b.take(5, t0);
        assert_eq!(b.available(t0), 0);
        assert_eq!(b.next_in(), Duration::from_millis(500));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.available(t1), 2);
        let t2 = t0 + Duration::from_secs(60);
        assert_eq!(b.available(t2), 5, "never more than the burst");
        assert_eq!(b.next_in(), Duration::ZERO);
    }
}
