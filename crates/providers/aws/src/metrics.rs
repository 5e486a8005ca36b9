//! Prometheus metrics for every AWS API attempt: requests, errors, throttles, latency.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels naming one AWS operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub service: String,
    pub operation: String,
}

/// Labels of a failed attempt: the operation plus a bounded error category.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub service: String,
    pub operation: String,
    pub category: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// AWS API metrics, shared by every client of the process.
#[derive(Debug)]
pub struct AwsMetrics {
    pub requests: Family<OperationLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub throttles: Family<OperationLabels, Counter>,
    pub latency: Family<OperationLabels, Histogram, fn() -> Histogram>,
    /// The client-side rate limiters' metrics.
    pub limiter: std::sync::Arc<crate::rate_limit::LimiterMetrics>,
}

impl Default for AwsMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            errors: Family::default(),
            throttles: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            limiter: Default::default(),
        }
    }
}

impl AwsMetrics {
    /// Creates the metrics and registers them under `stratus_aws_api_*`.
    pub fn register(registry: &mut Registry) -> AwsMetrics {
        let m = AwsMetrics {
            limiter: std::sync::Arc::new(crate::rate_limit::LimiterMetrics::register(registry)),
            ..AwsMetrics::default()
        };
        let r = registry.sub_registry_with_prefix("stratus_aws_api");
        r.register("requests", "AWS API request attempts", m.requests.clone());
        r.register(
            "errors",
            "AWS API attempts that failed, by category",
            m.errors.clone(),
        );
        r.register(
            "throttles",
            "AWS API attempts rejected by throttling",
            m.throttles.clone(),
        );
        r.register(
            "request_duration_seconds",
            "AWS API attempt latency",
            m.latency.clone(),
        );
        m
    }

    /// Total attempts of one operation (used by tests and benchmarks).
    pub fn request_count(&self, service: &str, operation: &str) -> u64 {
        self.requests
            .get_or_create(&OperationLabels {
                service: service.into(),
                operation: operation.into(),
            })
            .get()
    }
}
