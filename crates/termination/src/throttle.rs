//! Client-side throttle for Kubernetes API calls (`--kube-api-qps`, `--kube-api-burst`): a token
//! bucket every call waits on, as client-go's rate limiter.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket (refill `qps` per second, at most `burst` tokens).
#[derive(Debug)]
pub struct Throttle {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Throttle {
    /// A full bucket of `burst` tokens (at least 1) refilled at `qps` per second (at least
    /// 0.001).
    pub fn new(qps: f64, burst: u32) -> Throttle {
        let burst = f64::from(burst.max(1));
        Throttle {
            qps: qps.max(0.001),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// How long a call made now must wait (reserving its token).
    fn reserve(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = *state;
        let refilled =
            (tokens + now.saturating_duration_since(last).as_secs_f64() * self.qps).min(self.burst);
        let left = refilled - 1.0;
        *state = (left, now);
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let t = Throttle::new(5.0, 10);
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(t.reserve(start), Duration::ZERO);
        }
        assert_eq!(t.reserve(start), Duration::from_millis(200));
        assert_eq!(t.reserve(start), Duration::from_millis(400));
        // After two seconds the debt is paid and eight tokens are back.
        let later = start + Duration::from_secs(2);
        assert_eq!(t.reserve(later), Duration::ZERO);
    }
}
