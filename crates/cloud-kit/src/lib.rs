//! Machinery every Stratus cloud shares: the gcfg INI config dialect, the adaptive per-endpoint
//! rate limiter, the call guard (limiter wait, attempt metrics, error classification by a
//! cloud's own table, jittered retries, the idempotent-retry rule), the per-operation API
//! metrics, and the annotation engine. Pure machinery: no cloud SDK, no Kubernetes client.

pub mod annotations;
pub mod api_metrics;
pub mod call_guard;
pub mod gcfg;
pub mod limiter;

pub use api_metrics::ApiMetrics;
pub use call_guard::{CallGuard, Classified, Endpoint, Failure, RetryPolicy};
pub use limiter::{BucketConfig, CallClass, ServiceLimits};
