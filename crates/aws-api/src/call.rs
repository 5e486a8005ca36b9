//! How AWS is called: the shared call guard (rate limiter, metrics, retries) with AWS's error
//! table (which codes mean throttling, bad credentials or server trouble), its idempotent
//! mutations and its published request budgets.

use std::future::Future;
use std::sync::Arc;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use stratus_cloud::CloudError;
use stratus_cloud_kit::{
    ApiMetrics, BucketConfig, CallGuard, Classified, Endpoint, Failure, RetryPolicy, ServiceLimits,
};

/// The `cloud` label of AWS metrics.
pub const CLOUD: &str = "aws";

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
    "DeleteTags",
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

/// AWS's published EC2 request-token buckets (non-mutating 100 / 20 per s, mutating 200 / 5 per
/// s); the load-balancing APIs publish none, so they get the same read budget and a mutating
/// budget of 200 / 20 per s. Throttling answers shrink any of them at run time.
pub fn default_limits(service: &str) -> ServiceLimits {
    let read = BucketConfig {
        rate: 20.0,
        burst: 100.0,
    };
    match service {
        "ec2" => ServiceLimits {
            read,
            mutate: BucketConfig {
                rate: 5.0,
                burst: 200.0,
            },
        },
        _ => ServiceLimits {
            read,
            mutate: BucketConfig {
                rate: 20.0,
                burst: 200.0,
            },
        },
    }
}

/// What an AWS error code means.
fn classify_code(code: Option<&str>) -> Failure {
    match code {
        None => Failure::Transient,
        Some(c) if THROTTLE_CODES.contains(&c) => Failure::Throttled,
        Some(c) if AUTH_CODES.contains(&c) => Failure::Unauthorized,
        Some(c) if SERVER_CODES.contains(&c) => Failure::Transient,
        Some(_) => Failure::Rejected,
    }
}

/// Reads one failed SDK attempt.
fn classify<E, R>(err: &SdkError<E, R>) -> Classified
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    let code = err.code().map(str::to_string);
    let message = match (code.as_deref(), err.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_string(),
        _ => describe_sdk_error(err),
    };
    Classified {
        failure: classify_code(code.as_deref()),
        code,
        message,
    }
}

/// Calls AWS for one service, with the shared guard.
#[derive(Debug, Clone)]
pub struct AwsApi {
    guard: CallGuard,
}

impl AwsApi {
    /// An API caller for `service` (e.g. `ec2`) with the service's default rate limits.
    pub fn new(service: &'static str, metrics: Arc<ApiMetrics>, retry: RetryPolicy) -> Self {
        Self::with_limits(service, metrics, retry, default_limits(service))
    }

    /// An API caller for `service` with the given rate limits.
    pub fn with_limits(
        service: &'static str,
        metrics: Arc<ApiMetrics>,
        retry: RetryPolicy,
        limits: ServiceLimits,
    ) -> Self {
        let endpoint = Endpoint {
            cloud: CLOUD,
            service,
            limits,
            idempotent_mutations: IDEMPOTENT_MUTATIONS,
        };
        Self {
            guard: CallGuard::new(endpoint, metrics, retry),
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry budget is spent.
    pub async fn call<T, E, R, F, Fut>(
        &self,
        operation: &'static str,
        attempt: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug,
    {
        self.guard.call(operation, attempt, classify).await
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
    use stratus_cloud_kit::call_guard::may_retry;

    #[test]
    fn classifies_codes() {
        assert_eq!(
            classify_code(Some("RequestLimitExceeded")),
            Failure::Throttled
        );
        assert_eq!(classify_code(Some("Throttling")), Failure::Throttled);
        assert_eq!(
            classify_code(Some("UnauthorizedOperation")),
            Failure::Unauthorized
        );
        assert_eq!(classify_code(Some("InternalError")), Failure::Transient);
        assert_eq!(classify_code(None), Failure::Transient);
        assert_eq!(
            classify_code(Some("InvalidParameterValue")),
            Failure::Rejected
        );
    }

    #[test]
    fn only_safe_attempts_are_sent_again() {
        let retry = |op, f| may_retry(op, f, IDEMPOTENT_MUTATIONS);
        assert!(retry("DescribeInstances", Failure::Transient));
        assert!(retry("RegisterTargets", Failure::Transient));
        assert!(retry("CreateSecurityGroup", Failure::Throttled));
        assert!(!retry("CreateSecurityGroup", Failure::Transient));
        assert!(!retry("AuthorizeSecurityGroupIngress", Failure::Transient));
        assert!(!retry("DescribeInstances", Failure::Rejected));
        assert!(!retry("DescribeInstances", Failure::Unauthorized));
    }
}
