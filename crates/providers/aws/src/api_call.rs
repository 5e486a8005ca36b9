//! One way to call AWS: wait for the service's rate limiter, measure every attempt, classify
//! errors, retry with jittered backoff (throttling also shrinks the limiter's budget).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use stratus_cloud::CloudError;

use crate::metrics::{AwsMetrics, ErrorLabels, OperationLabels};
use crate::rate_limit::{default_limits, CallClass, ServiceLimiter, ServiceLimits};

/// Error codes AWS services use for throttling.
const THROTTLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "PriorRequestNotComplete",
];

/// Error codes that mean the credentials or permissions are wrong.
const AUTH_CODES: &[&str] = &[
    "UnauthorizedOperation",
    "AuthFailure",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "UnrecognizedClientException",
];

/// Error codes of server-side trouble worth retrying.
const SERVER_CODES: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "InsufficientInstanceCapacity",
];

/// Mutations that leave the same state when repeated (same name and settings, or a pure set/
/// add/remove of members), so an attempt whose answer was lost may be sent again. Other
/// mutations (CreateSecurityGroup, AuthorizeSecurityGroupIngress, CreateRoute, CreateListener...)
/// are retried only when AWS throttled them, which means they were not carried out; after any
/// other failure the controller's next reconcile looks the resource up before trying again.
const IDEMPOTENT_MUTATIONS: &[&str] = &[
    "AddTags",
    "ApplySecurityGroupsToLoadBalancer",
    "AttachLoadBalancerToSubnets",
    "ConfigureHealthCheck",
    "CreateLoadBalancer",
    "CreateTargetGroup",
    "CreateTags",
    "DeleteLoadBalancer",
    "DeregisterInstancesFromLoadBalancer",
    "DeregisterTargets",
    "DetachLoadBalancerFromSubnets",
    "ModifyInstanceAttribute",
    "ModifyListener",
    "ModifyLoadBalancerAttributes",
    "ModifyTargetGroup",
    "ModifyTargetGroupAttributes",
    "RegisterInstancesWithLoadBalancer",
    "RegisterTargets",
    "ReplaceRoute",
    "SetLoadBalancerPoliciesForBackendServer",
    "SetLoadBalancerPoliciesOfListener",
];

/// Whether a failed attempt of `operation` may be sent again.
fn may_retry(operation: &str, failure: Failure) -> bool {
    match failure {
        // Throttled requests were not carried out.
        Failure::Throttled => true,
        Failure::Transient => {
            CallClass::of(operation) == CallClass::Read || IDEMPOTENT_MUTATIONS.contains(&operation)
        }
        Failure::Unauthorized | Failure::Rejected => false,
    }
}

/// Retry budget for one logical call.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts including the first.
    pub max_attempts: u32,
    /// Backoff before the first retry; doubles each retry, with full jitter.
    pub base_delay: Duration,
    /// Upper bound of one backoff.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// Jittered exponential backoff before retry number `retry` (0-based).
    pub fn backoff(&self, retry: u32) -> Duration {
        let cap = self
            .base_delay
            .saturating_mul(1u32 << retry.min(16))
            .min(self.max_delay);
        let millis = cap.as_millis() as u64;
        Duration::from_millis(millis / 2 + rand::random_range(0..=millis / 2))
    }
}

/// Calls AWS for one service, with metrics and retries.
#[derive(Debug, Clone)]
pub struct AwsApi {
    service: &'static str,
    metrics: Arc<AwsMetrics>,
    retry: RetryPolicy,
    /// Shared by every clone: one limiter per service endpoint.
    limiter: Arc<ServiceLimiter>,
}

/// What kind of failure one attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Throttled,
    Transient,
    Unauthorized,
    Rejected,
}

fn classify(code: Option<&str>) -> Failure {
    match code {
        None => Failure::Transient,
        Some(c) if THROTTLE_CODES.contains(&c) => Failure::Throttled,
        Some(c) if AUTH_CODES.contains(&c) => Failure::Unauthorized,
        Some(c) if SERVER_CODES.contains(&c) => Failure::Transient,
        Some(_) => Failure::Rejected,
    }
}

impl AwsApi {
    /// An API caller for `service` (e.g. `ec2`) with the service's default rate limits.
    pub fn new(service: &'static str, metrics: Arc<AwsMetrics>, retry: RetryPolicy) -> Self {
        Self::with_limits(service, metrics, retry, default_limits(service))
    }

    /// An API caller for `service` with the given rate limits.
    pub fn with_limits(
        service: &'static str,
        metrics: Arc<AwsMetrics>,
        retry: RetryPolicy,
        limits: ServiceLimits,
    ) -> Self {
        let limiter = Arc::new(ServiceLimiter::new(
            service,
            limits,
            metrics.limiter.clone(),
        ));
        Self {
            service,
            metrics,
            retry,
            limiter,
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry budget is spent.
    pub async fn call<T, E, R, F, Fut>(
        &self,
        operation: &'static str,
        mut attempt: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug,
    {
        let labels = OperationLabels {
            service: self.service.to_string(),
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
                Err(e) => e,
            };
            let code = err.code().map(str::to_string);
            let failure = classify(code.as_deref());
            let cloud_error = to_cloud_error(operation, failure, code.as_deref(), &err);
            self.metrics
                .errors
                .get_or_create(&ErrorLabels {
                    service: self.service.to_string(),
                    operation: operation.to_string(),
                    category: cloud_error.category().to_string(),
                })
                .inc();
            if failure == Failure::Throttled {
                self.metrics.throttles.get_or_create(&labels).inc();
                self.limiter.throttled(operation);
            }
            tries += 1;
            if !may_retry(operation, failure) || tries >= self.retry.max_attempts {
                return Err(cloud_error);
            }
            let delay = self.retry.backoff(tries - 1);
            tracing::debug!(
                service = self.service,
                operation,
                category = cloud_error.category(),
                retry_in_ms = delay.as_millis() as u64,
                "retrying AWS call"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

fn to_cloud_error<E, R>(
    operation: &str,
    failure: Failure,
    code: Option<&str>,
    err: &SdkError<E, R>,
) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    let message = match (code, err.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_string(),
        _ => describe_sdk_error(err),
    };
    let operation = operation.to_string();
    match failure {
        Failure::Throttled => CloudError::Throttled { operation, message },
        Failure::Transient => CloudError::Unavailable { operation, message },
        Failure::Unauthorized => CloudError::Unauthorized { operation, message },
        Failure::Rejected => CloudError::Rejected {
            operation,
            code: code.unwrap_or("Unknown").to_string(),
            message,
        },
    }
}

/// A one-line description of a transport-level SDK error (no response body, no secrets).
fn describe_sdk_error<E, R>(err: &SdkError<E, R>) -> String
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_codes() {
        assert_eq!(classify(Some("RequestLimitExceeded")), Failure::Throttled);
        assert_eq!(classify(Some("Throttling")), Failure::Throttled);
        assert_eq!(
            classify(Some("UnauthorizedOperation")),
            Failure::Unauthorized
        );
        assert_eq!(classify(Some("InternalError")), Failure::Transient);
        assert_eq!(classify(None), Failure::Transient);
        assert_eq!(classify(Some("InvalidParameterValue")), Failure::Rejected);
    }

    #[test]
    fn only_safe_attempts_are_sent_again() {
        assert!(may_retry("DescribeInstances", Failure::Transient));
        assert!(may_retry("RegisterTargets", Failure::Transient));
        assert!(may_retry("CreateSecurityGroup", Failure::Throttled));
        assert!(!may_retry("CreateSecurityGroup", Failure::Transient));
        assert!(!may_retry(
            "AuthorizeSecurityGroupIngress",
            Failure::Transient
        ));
        assert!(!may_retry("DescribeInstances", Failure::Rejected));
        assert!(!may_retry("DescribeInstances", Failure::Unauthorized));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        for retry in 0..20 {
            let d = p.backoff(retry);
            assert!(d <= p.max_delay, "{retry}: {d:?}");
            let cap = p
                .base_delay
                .saturating_mul(1 << retry.min(16))
                .min(p.max_delay);
            assert!(d >= cap / 2, "{retry}: {d:?}");
        }
    }
}
