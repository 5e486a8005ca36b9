//! One way to call a cloud API: wait for the endpoint's rate limiter, measure every attempt,
//! classify its error with the cloud's own table, and retry with jittered backoff — but resend
//! a mutation whose answer was lost only when the cloud's table says it is idempotent
//! (throttling shrinks the limiter's budget too).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stratus_cloud::CloudError;
use stratus_runtime::backoff::Backoff;
use tokio::time::Instant;

use crate::api_metrics::{ApiMetrics, ErrorLabels, OperationLabels};
use crate::limiter::{CallClass, ServiceLimiter, ServiceLimits};

/// What kind of failure one attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The cloud refused to carry the call out because of its rate: always safe to resend.
    Throttled,
    /// The answer is unknown (transport error, 5xx): resent only when safe.
    Transient,
    /// Credentials or permissions are wrong.
    Unauthorized,
    /// The cloud refused the request for a reason retrying will not fix.
    Rejected,
}

/// A failed attempt as the cloud's error table reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// What kind of failure.
    pub failure: Failure,
    /// The cloud's error code, when it sent one (`RequestLimitExceeded`, `409`…).
    pub code: Option<String>,
    /// One line for people: never a credential, never a whole response body.
    pub message: String,
}

/// Retry budget for one logical call.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts including the first.
    pub max_attempts: u32,
    /// Jittered backoff between attempts.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            backoff: Backoff::new(Duration::from_millis(200), Duration::from_secs(5)),
        }
    }
}

/// One service endpoint of a cloud, as the guard needs to know it.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    /// `aws`, `openstack`…: the `cloud` metric label.
    pub cloud: &'static str,
    /// `ec2`, `compute`…: the `service` metric label.
    pub service: &'static str,
    /// The endpoint's rate budgets.
    pub limits: ServiceLimits,
    /// Mutations that leave the same state when repeated, so an attempt whose answer was lost
    /// may be sent again. Other mutations are resent only after throttling.
    pub idempotent_mutations: &'static [&'static str],
}

/// Whether a failed attempt of `operation` may be sent again.
pub fn may_retry(operation: &str, failure: Failure, idempotent: &[&str]) -> bool {
    match failure {
        // Throttled requests were not carried out.
        Failure::Throttled => true,
        Failure::Transient => {
            CallClass::of(operation) == CallClass::Read || idempotent.contains(&operation)
        }
        Failure::Unauthorized | Failure::Rejected => false,
    }
}

/// Calls one service endpoint, with its limiter, metrics and retries; clones share the limiter.
#[derive(Debug, Clone)]
pub struct CallGuard {
    endpoint: Endpoint,
    metrics: Arc<ApiMetrics>,
    retry: RetryPolicy,
    limiter: Arc<ServiceLimiter>,
}

impl CallGuard {
    /// A guard for `endpoint`, reporting into `metrics`.
    pub fn new(endpoint: Endpoint, metrics: Arc<ApiMetrics>, retry: RetryPolicy) -> Self {
        let limiter = Arc::new(ServiceLimiter::new(
            endpoint.cloud,
            endpoint.service,
            endpoint.limits,
            metrics.limiter.clone(),
        ));
        Self {
            endpoint,
            metrics,
            retry,
            limiter,
        }
    }

    /// The endpoint this guard calls.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The metrics it reports into.
    pub fn metrics(&self) -> &Arc<ApiMetrics> {
        &self.metrics
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry budget is spent; each
    /// error is read by `classify`.
    pub async fn call<T, E, F, Fut>(
        &self,
        operation: &'static str,
        mut attempt: F,
        classify: impl Fn(&E) -> Classified,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let labels = OperationLabels {
            cloud: self.endpoint.cloud.to_string(),
            service: self.endpoint.service.to_string(),
            operation: operation.to_string(),
        };
        let mut tries = 0;
        loop {
            self.limiter.acquire(operation).await;
            let started = Instant::now();
            let result = attempt().await;
            self.metrics.requests.get_or_create(&labels).inc();
            self.metrics
                .latency
                .get_or_create(&labels)
                .observe(started.elapsed().as_secs_f64());
            let err = match result {
                Ok(v) => return Ok(v),
                Err(e) => classify(&e),
            };
            let cloud_error = to_cloud_error(operation, &err);
            self.metrics
                .errors
                .get_or_create(&ErrorLabels {
                    cloud: labels.cloud.clone(),
                    service: labels.service.clone(),
                    operation: labels.operation.clone(),
                    category: cloud_error.category().to_string(),
                })
                .inc();
            if err.failure == Failure::Throttled {
                self.metrics.throttles.get_or_create(&labels).inc();
                self.limiter.throttled(operation);
            }
            tries += 1;
            if !may_retry(operation, err.failure, self.endpoint.idempotent_mutations)
                || tries >= self.retry.max_attempts
            {
                return Err(cloud_error);
            }
            let delay = self.retry.backoff.jittered(tries);
            tracing::debug!(
                cloud = self.endpoint.cloud,
                service = self.endpoint.service,
                operation,
                category = cloud_error.category(),
                retry_in_ms = delay.as_millis() as u64,
                "retrying cloud API call"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// The [`CloudError`] a classified failure becomes.
pub fn to_cloud_error(operation: &str, err: &Classified) -> CloudError {
    let operation = operation.to_string();
    let message = err.message.clone();
    match err.failure {
        Failure::Throttled => CloudError::Throttled { operation, message },
        Failure::Transient => CloudError::Unavailable { operation, message },
        Failure::Unauthorized => CloudError::Unauthorized { operation, message },
        Failure::Rejected => CloudError::Rejected {
            operation,
            code: err.code.clone().unwrap_or_else(|| "Unknown".into()),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::BucketConfig;
    use std::sync::atomic::{AtomicU32, Ordering};

    const IDEMPOTENT: &[&str] = &["RegisterTargets"];

    fn guard() -> CallGuard {
        let bucket = BucketConfig {
            rate: 1000.0,
            burst: 1000.0,
        };
        CallGuard::new(
            Endpoint {
                cloud: "test",
                service: "svc",
                limits: ServiceLimits {
                    read: bucket,
                    mutate: bucket,
                },
                idempotent_mutations: IDEMPOTENT,
            },
            Arc::new(ApiMetrics::default()),
            RetryPolicy {
                max_attempts: 3,
                backoff: Backoff::new(Duration::from_millis(1), Duration::from_millis(2)),
            },
        )
    }

    fn failing(failure: Failure) -> Classified {
        Classified {
            failure,
            code: Some("Code".into()),
            message: "Code: boom".into(),
        }
    }

    #[test]
    fn only_safe_attempts_are_sent_again() {
        assert!(may_retry(
            "DescribeInstances",
            Failure::Transient,
            IDEMPOTENT
        ));
        assert!(may_retry("RegisterTargets", Failure::Transient, IDEMPOTENT));
        assert!(may_retry(
            "CreateSecurityGroup",
            Failure::Throttled,
            IDEMPOTENT
        ));
        assert!(!may_retry(
            "CreateSecurityGroup",
            Failure::Transient,
            IDEMPOTENT
        ));
        assert!(!may_retry(
            "DescribeInstances",
            Failure::Rejected,
            IDEMPOTENT
        ));
        assert!(!may_retry(
            "DescribeInstances",
            Failure::Unauthorized,
            IDEMPOTENT
        ));
    }

    async fn attempts(operation: &'static str, failure: Failure) -> (u32, CloudError) {
        let g = guard();
        let n = AtomicU32::new(0);
        let err = g
            .call(
                operation,
                || {
                    n.fetch_add(1, Ordering::SeqCst);
                    async { Err::<(), _>(failure) }
                },
                |f: &Failure| failing(*f),
            )
            .await
            .unwrap_err();
        assert_eq!(
            g.metrics().request_count("test", "svc", operation),
            u64::from(n.load(Ordering::SeqCst))
        );
        (n.load(Ordering::SeqCst), err)
    }

    #[tokio::test]
    async fn retries_follow_the_table_and_the_budget() {
        let (n, e) = attempts("DescribeThings", Failure::Transient).await;
        assert_eq!(n, 3);
        assert_eq!(e.category(), "CloudUnavailable");
        let (n, e) = attempts("CreateThing", Failure::Transient).await;
        assert_eq!(n, 1, "a lost create is not resent");
        assert!(e.is_transient());
        let (n, e) = attempts("CreateThing", Failure::Throttled).await;
        assert_eq!(n, 3);
        assert_eq!(e.category(), "Throttled");
        let (n, e) = attempts("DescribeThings", Failure::Rejected).await;
        assert_eq!(n, 1);
        assert_eq!(
            e.to_string(),
            "cloud API DescribeThings rejected the request (Code): Code: boom"
        );
    }
}
