//! Prometheus metrics for every cloud API attempt: requests, errors, throttles, latency, labelled
//! by cloud, service and operation (all bounded: operation names are constants in the code).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::limiter::LimiterMetrics;

/// Labels naming one cloud operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// `aws`, `openstack`…
    pub cloud: String,
    /// The service endpoint (`ec2`, `compute`…).
    pub service: String,
    /// The operation (`DescribeInstances`, `ListServers`…).
    pub operation: String,
}

/// Labels of a failed attempt: the operation plus a bounded error category.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// `aws`, `openstack`…
    pub cloud: String,
    /// The service endpoint.
    pub service: String,
    /// The operation.
    pub operation: String,
    /// [`stratus_cloud::CloudError::category`].
    pub category: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// Cloud API metrics, shared by every client of the process.
#[derive(Debug)]
pub struct ApiMetrics {
    /// Attempts.
    pub requests: Family<OperationLabels, Counter>,
    /// Failed attempts by category.
    pub errors: Family<ErrorLabels, Counter>,
    /// Attempts the cloud throttled.
    pub throttles: Family<OperationLabels, Counter>,
    /// Attempt latency.
    pub latency: Family<OperationLabels, Histogram, fn() -> Histogram>,
    /// The client-side rate limiters' metrics.
    pub limiter: Arc<LimiterMetrics>,
}

impl Default for ApiMetrics {
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

impl ApiMetrics {
    /// Creates the metrics and registers them under `stratus_cloud_api_*` and
    /// `stratus_cloud_rate_limiter_*`.
    pub fn register(registry: &mut Registry) -> ApiMetrics {
        let m = ApiMetrics {
            limiter: Arc::new(LimiterMetrics::register(registry)),
            ..ApiMetrics::default()
        };
        let r = registry.sub_registry_with_prefix("stratus_cloud_api");
        r.register("requests", "Cloud API request attempts", m.requests.clone());
        r.register(
            "errors",
            "Cloud API attempts that failed, by category",
            m.errors.clone(),
        );
        r.register(
            "throttles",
            "Cloud API attempts rejected by throttling",
            m.throttles.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Cloud API attempt latency",
            m.latency.clone(),
        );
        m
    }

    /// Total attempts of one operation (used by tests and benchmarks).
    pub fn request_count(&self, cloud: &str, service: &str, operation: &str) -> u64 {
        self.requests
            .get_or_create(&OperationLabels {
                cloud: cloud.into(),
                service: service.into(),
                operation: operation.into(),
            })
            .get()
    }
}
