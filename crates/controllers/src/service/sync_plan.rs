//! Pure decisions of the service controller's sync path: whether a Service needs a full ensure
//! or only a target update, how a cloud error is answered (Warning or not, retry or wait for a
//! change), and how long to wait before the next attempt.

use std::time::Duration;

use stratus_cloud::CloudError;
use stratus_runtime::backoff::Backoff;

/// What one sync of a Service with our finalizer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStep {
    /// Create or update the whole load balancer.
    FullEnsure,
    /// Only bring its targets up to the node set (nothing else changed since the last ensure).
    UpdateTargets,
}

/// What is remembered of the last full ensure of a Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastEnsure {
    /// Fingerprint of the request without its nodes.
    pub fingerprint: u64,
    /// How long ago it was.
    pub age: Duration,
}

/// A full ensure is due unless the last one had the same request (nodes aside), is younger than
/// `full_resync`, and the Service shows an ingress.
pub fn plan_sync_step(
    last: Option<LastEnsure>,
    fingerprint: u64,
    has_ingress: bool,
    full_resync: Duration,
) -> SyncStep {
    match last {
        Some(l) if l.fingerprint == fingerprint && l.age < full_resync && has_ingress => {
            SyncStep::UpdateTargets
        }
        _ => SyncStep::FullEnsure,
    }
}

/// How the controller answers a cloud error of a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorAnswer {
    /// Not a failure: the cloud is still working. Look again after the delay, no Warning,
    /// no worker held.
    LookAgain(Duration),
    /// Another controller owns the load balancer: do nothing until the Service changes.
    LeaveAlone,
    /// Publish a Warning; retrying cannot help, so wait until the Service changes.
    WarnAndWait,
    /// Publish a Warning and retry with backoff.
    WarnAndRetry,
}

/// The answer to `error`.
pub fn answer_error(error: &CloudError) -> ErrorAnswer {
    match error {
        CloudError::Pending { retry_after, .. } => ErrorAnswer::LookAgain(*retry_after),
        CloudError::ImplementedElsewhere(_) => ErrorAnswer::LeaveAlone,
        CloudError::InvalidInput(_) => ErrorAnswer::WarnAndWait,
        _ => ErrorAnswer::WarnAndRetry,
    }
}

/// Why the last sync of a Service failed, for its retry delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A write lost a race (409): retry almost at once.
    Conflict,
    /// Throttling or an unreachable cloud: retry soon, jittered, capped low.
    Passing,
    /// Anything else.
    Other,
}

/// Retry delays of the service controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryDelays {
    /// For failures that are not passing.
    pub backoff: Backoff,
    /// For throttling and outages (jittered).
    pub passing: Backoff,
}

/// How long after a conflict the Service is synced again.
pub const CONFLICT_RETRY: Duration = Duration::from_millis(200);

/// The delay before attempt `failures + 1`.
pub fn retry_delay(kind: FailureKind, failures: u32, delays: RetryDelays) -> Duration {
    match kind {
        FailureKind::Conflict => CONFLICT_RETRY,
        FailureKind::Passing => delays.passing.jittered(failures),
        FailureKind::Other => delays.backoff.delay(failures),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESYNC: Duration = Duration::from_secs(600);

    #[test]
    fn sync_step_table() {
        let fresh = Some(LastEnsure {
            fingerprint: 7,
            age: Duration::from_secs(5),
        });
        let old = Some(LastEnsure {
            fingerprint: 7,
            age: RESYNC,
        });
        let cases = [
            (fresh, 7, true, SyncStep::UpdateTargets),
            (fresh, 8, true, SyncStep::FullEnsure),
            (fresh, 7, false, SyncStep::FullEnsure),
            (old, 7, true, SyncStep::FullEnsure),
            (None, 7, true, SyncStep::FullEnsure),
        ];
        for (i, (last, fp, ingress, want)) in cases.into_iter().enumerate() {
            assert_eq!(plan_sync_step(last, fp, ingress, RESYNC), want, "case {i}");
        }
    }

    #[test]
    fn error_answers() {
        let pending = CloudError::Pending {
            what: "load balancer".into(),
            retry_after: Duration::from_secs(3),
        };
        assert_eq!(
            answer_error(&pending),
            ErrorAnswer::LookAgain(Duration::from_secs(3))
        );
        assert_eq!(
            answer_error(&CloudError::ImplementedElsewhere("x".into())),
            ErrorAnswer::LeaveAlone
        );
        assert_eq!(
            answer_error(&CloudError::InvalidInput("x".into())),
            ErrorAnswer::WarnAndWait
        );
        let throttled = CloudError::Throttled {
            operation: "Op".into(),
            message: "m".into(),
        };
        assert_eq!(answer_error(&throttled), ErrorAnswer::WarnAndRetry);
    }

    #[test]
    fn retry_delays() {
        let delays = RetryDelays {
            backoff: Backoff::new(Duration::from_secs(5), Duration::from_secs(300)),
            passing: Backoff::new(Duration::from_secs(1), Duration::from_secs(15)),
        };
        assert_eq!(
            retry_delay(FailureKind::Conflict, 9, delays),
            CONFLICT_RETRY
        );
        assert_eq!(
            retry_delay(FailureKind::Other, 3, delays),
            Duration::from_secs(20)
        );
        for n in 1..12 {
            let d = retry_delay(FailureKind::Passing, n, delays);
            assert!(d <= Duration::from_secs(15), "{n}: {d:?}");
        }
    }
}
