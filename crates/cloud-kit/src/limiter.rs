//! One adaptive client-side rate limiter per cloud service endpoint: token buckets with separate
//! budgets for read (Describe/Get/List) and mutating calls, whose refill rate halves when the
//! cloud throttles and recovers gradually while it does not (AIMD), shared by every controller.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Which budget a call spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallClass {
    /// Describe, Get and List calls.
    Read,
    /// Every other call.
    Mutate,
}

impl CallClass {
    /// Reads are the Describe*, Get* and List* operations; everything else mutates.
    pub fn of(operation: &str) -> CallClass {
        if ["Describe", "Get", "List"]
            .iter()
            .any(|p| operation.starts_with(p))
        {
            CallClass::Read
        } else {
            CallClass::Mutate
        }
    }

    /// The metric label: `read` or `mutate`.
    pub fn label(self) -> &'static str {
        match self {
            CallClass::Read => "read",
            CallClass::Mutate => "mutate",
        }
    }
}

/// A bucket's settings: up to `burst` calls at once, `rate` per second sustained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketConfig {
    /// Sustained calls per second.
    pub rate: f64,
    /// Calls that may go at once after a quiet period.
    pub burst: f64,
}

/// The budgets of one service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServiceLimits {
    /// Describe/Get/List calls.
    pub read: BucketConfig,
    /// Every other call.
    pub mutate: BucketConfig,
}

/// The lowest share of the configured rate throttling can push a bucket down to.
const FLOOR_SHARE: f64 = 0.05;
/// Two throttles closer than this count once (concurrent calls see the same congestion).
const THROTTLE_COOLDOWN: Duration = Duration::from_secs(1);
/// Share of the configured rate regained per second without throttling.
const RECOVERY_PER_SECOND: f64 = 0.05;

/// One token bucket with an adaptive refill rate (pure: time is passed in).
#[derive(Debug, Clone)]
pub struct Bucket {
    config: BucketConfig,
    /// Current refill rate, between `FLOOR_SHARE × config.rate` and `config.rate`.
    rate: f64,
    /// Tokens available; negative while callers wait for reserved tokens.
    tokens: f64,
    updated: Instant,
    last_throttle: Option<Instant>,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(config: BucketConfig, now: Instant) -> Bucket {
        Bucket {
            config,
            rate: config.rate,
            tokens: config.burst,
            updated: now,
            last_throttle: None,
        }
    }

    fn advance(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = now;
        // Recovery: additive increase while no throttle was seen for a cooldown.
        let calm = self
            .last_throttle
            .is_none_or(|t| now.saturating_duration_since(t) >= THROTTLE_COOLDOWN);
        if calm && self.rate < self.config.rate {
            self.rate = (self.rate + self.config.rate * RECOVERY_PER_SECOND * elapsed)
                .min(self.config.rate);
        }
        self.tokens = (self.tokens + self.rate * elapsed).min(self.config.burst);
    }

    /// Takes one token; returns how long the caller must wait before calling.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.advance(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// The cloud throttled a call: halve the rate (once per cooldown) and drop the burst reserve, so
    /// the next calls are spaced out at once.
    pub fn throttled(&mut self, now: Instant) {
        self.advance(now);
        let recent = self
            .last_throttle
            .is_some_and(|t| now.saturating_duration_since(t) < THROTTLE_COOLDOWN);
        if !recent {
            self.rate = (self.rate / 2.0).max(self.config.rate * FLOOR_SHARE);
            self.tokens = self.tokens.min(0.0);
        }
        self.last_throttle = Some(now);
    }

    /// The current refill rate (calls per second).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Tokens available (negative while callers wait).
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

/// Labels of one bucket.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimiterLabels {
    /// `aws`, `openstack`…
    pub cloud: String,
    /// The service endpoint (`ec2`, `compute`…).
    pub service: String,
    /// `read` or `mutate`.
    pub class: String,
}

/// Rate-limiter metrics, shared by the limiters of every service.
#[derive(Debug, Default)]
pub struct LimiterMetrics {
    /// Calls that had to wait for a token.
    pub waits: Family<LimiterLabels, Counter>,
    /// Total seconds waited, in milliseconds.
    pub waited_ms: Family<LimiterLabels, Counter>,
    /// Throttling errors that shrank a bucket.
    pub throttles: Family<LimiterLabels, Counter>,
    /// Current refill rate (calls per second × 1000).
    pub rate_milli: Family<LimiterLabels, Gauge>,
    /// Tokens available now (negative: calls waiting), × 1000.
    pub tokens_milli: Family<LimiterLabels, Gauge>,
}

impl LimiterMetrics {
    /// Creates the metrics and registers them under `stratus_cloud_rate_limiter_*`.
    pub fn register(registry: &mut Registry) -> LimiterMetrics {
        let m = LimiterMetrics::default();
        let r = registry.sub_registry_with_prefix("stratus_cloud_rate_limiter");
        r.register(
            "waits",
            "Cloud API calls that waited for a token",
            m.waits.clone(),
        );
        r.register(
            "waited_milliseconds",
            "Time cloud API calls waited for tokens",
            m.waited_ms.clone(),
        );
        r.register(
            "throttles",
            "Cloud throttling errors that shrank a bucket",
            m.throttles.clone(),
        );
        r.register(
            "rate_millicalls_per_second",
            "Current refill rate of a bucket (calls per second × 1000)",
            m.rate_milli.clone(),
        );
        r.register(
            "tokens_milli",
            "Tokens in a bucket (× 1000; negative while calls wait)",
            m.tokens_milli.clone(),
        );
        m
    }
}

/// The limiter of one service endpoint.
#[derive(Debug)]
pub struct ServiceLimiter {
    cloud: &'static str,
    service: &'static str,
    read: Mutex<Bucket>,
    mutate: Mutex<Bucket>,
    metrics: std::sync::Arc<LimiterMetrics>,
}

impl ServiceLimiter {
    /// A limiter for `service` of `cloud`, reporting into `metrics`.
    pub fn new(
        cloud: &'static str,
        service: &'static str,
        limits: ServiceLimits,
        metrics: std::sync::Arc<LimiterMetrics>,
    ) -> ServiceLimiter {
        let now = Instant::now();
        let limiter = ServiceLimiter {
            cloud,
            service,
            read: Mutex::new(Bucket::new(limits.read, now)),
            mutate: Mutex::new(Bucket::new(limits.mutate, now)),
            metrics,
        };
        limiter.publish(CallClass::Read, &Bucket::new(limits.read, now));
        limiter.publish(CallClass::Mutate, &Bucket::new(limits.mutate, now));
        limiter
    }

    fn bucket(&self, class: CallClass) -> std::sync::MutexGuard<'_, Bucket> {
        match class {
            CallClass::Read => &self.read,
            CallClass::Mutate => &self.mutate,
        }
        .lock()
        .unwrap_or_else(|e| e.into_inner())
    }

    fn labels(&self, class: CallClass) -> LimiterLabels {
        LimiterLabels {
            cloud: self.cloud.to_string(),
            service: self.service.to_string(),
            class: class.label().to_string(),
        }
    }

    fn publish(&self, class: CallClass, bucket: &Bucket) {
        let labels = self.labels(class);
        self.metrics
            .rate_milli
            .get_or_create(&labels)
            .set((bucket.rate() * 1000.0) as i64);
        self.metrics
            .tokens_milli
            .get_or_create(&labels)
            .set((bucket.tokens() * 1000.0) as i64);
    }

    /// Waits for a token of `operation`'s budget.
    pub async fn acquire(&self, operation: &str) {
        let class = CallClass::of(operation);
        let wait = {
            let mut bucket = self.bucket(class);
            let wait = bucket.reserve(Instant::now());
            self.publish(class, &bucket);
            wait
        };
        if !wait.is_zero() {
            let labels = self.labels(class);
            self.metrics.waits.get_or_create(&labels).inc();
            self.metrics
                .waited_ms
                .get_or_create(&labels)
                .inc_by(wait.as_millis() as u64);
            tokio::time::sleep(wait).await;
        }
    }

    /// The cloud throttled `operation`: its budget shrinks.
    pub fn throttled(&self, operation: &str) {
        let class = CallClass::of(operation);
        let mut bucket = self.bucket(class);
        bucket.throttled(Instant::now());
        self.publish(class, &bucket);
        self.metrics
            .throttles
            .get_or_create(&self.labels(class))
            .inc();
        tracing::debug!(
            cloud = self.cloud,
            service = self.service,
            class = class.label(),
            rate = bucket.rate(),
            "cloud API throttled: slowing down"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(rate: f64, burst: f64) -> (Bucket, Instant) {
        let now = Instant::now();
        (Bucket::new(BucketConfig { rate, burst }, now), now)
    }

    #[test]
    fn classes_follow_the_operation_name() {
        assert_eq!(CallClass::of("DescribeInstances"), CallClass::Read);
        assert_eq!(CallClass::of("GetConsoleOutput"), CallClass::Read);
        assert_eq!(CallClass::of("CreateLoadBalancer"), CallClass::Mutate);
        assert_eq!(CallClass::of("RegisterTargets"), CallClass::Mutate);
    }

    #[test]
    fn burst_is_free_then_calls_are_spaced_at_the_rate() {
        let (mut b, now) = bucket(10.0, 3.0);
        for _ in 0..3 {
            assert_eq!(b.reserve(now), Duration::ZERO);
        }
        // The 4th and 5th wait one and two refill intervals.
        assert_eq!(b.reserve(now), Duration::from_millis(100));
        assert_eq!(b.reserve(now), Duration::from_millis(200));
        // A second later the debt is repaid and tokens are back (up to the burst).
        let later = now + Duration::from_secs(1);
        assert_eq!(b.reserve(later), Duration::ZERO);
        assert!(b.tokens() <= 3.0);
    }

    #[test]
    fn throttling_halves_the_rate_once_per_cooldown_down_to_a_floor() {
        let (mut b, now) = bucket(20.0, 100.0);
        b.throttled(now);
        assert_eq!(b.rate(), 10.0);
        assert!(b.tokens() <= 0.0, "the burst reserve is dropped");
        // Concurrent throttles within the cooldown count once.
        b.throttled(now + Duration::from_millis(100));
        assert_eq!(b.rate(), 10.0);
        let mut t = now;
        for _ in 0..20 {
            t += Duration::from_millis(1100);
            b.throttled(t);
        }
        // Down at the floor (plus what a calm 0.1 s between throttles gives back).
        let floor = 20.0 * FLOOR_SHARE;
        assert!(b.rate() >= floor && b.rate() < 2.0 * floor, "{}", b.rate());
    }

    #[test]
    fn the_rate_recovers_gradually_without_throttles() {
        let (mut b, now) = bucket(20.0, 100.0);
        b.throttled(now);
        assert_eq!(b.rate(), 10.0);
        // 5 % of the configured rate per calm second: +1/s.
        b.reserve(now + Duration::from_secs(5));
        assert!((b.rate() - 15.0).abs() < 1e-9, "{}", b.rate());
        b.reserve(now + Duration::from_secs(600));
        assert_eq!(b.rate(), 20.0, "never above the configured rate");
    }

    #[test]
    fn sustained_rate_never_exceeds_the_budget() {
        let (mut b, now) = bucket(5.0, 10.0);
        // 100 calls reserved at once: the last may go after (100 - 10) / 5 = 18 s.
        let mut last = Duration::ZERO;
        for _ in 0..100 {
            last = b.reserve(now);
        }
        assert_eq!(last, Duration::from_secs(18));
    }
}
