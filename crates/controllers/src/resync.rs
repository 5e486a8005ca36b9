//! `--min-resync-period`: as client-go's shared informers, every object is handed to its
//! controller again after a period drawn at random from [min, 2·min), each time anew, so that
//! replicas and controllers do not resync in step. A controller's own sync decides whether
//! anything is written (nothing, when all is as it should be).

use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use rand::Rng;

/// Upstream's default `--min-resync-period`.
pub const DEFAULT_MIN_RESYNC: Duration = Duration::from_secs(12 * 3600);

/// The next resync delay for `min`: uniform in [min, 2·min).
pub fn next_delay(min: Duration, unit: f64) -> Duration {
    min.mul_f64(1.0 + unit.clamp(0.0, 0.999_999))
}

/// One `()` per resync, forever; none when `min` is zero.
pub fn resync_ticks(min: Duration) -> BoxStream<'static, ()> {
    if min.is_zero() {
        return futures::stream::pending().boxed();
    }
    futures::stream::unfold((), move |()| async move {
        let unit: f64 = rand::rng().random();
        tokio::time::sleep(next_delay(min, unit)).await;
        Some(((), ()))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_fall_between_min_and_twice_min() {
        let min = Duration::from_secs(3600);
        assert_eq!(next_delay(min, 0.0), min);
        assert!(next_delay(min, 1.0) < min * 2);
        assert_eq!(next_delay(min, 0.5), Duration::from_secs(5400));
    }
}
