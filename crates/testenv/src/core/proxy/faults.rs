//! Fault injection for the proxy: per service and action, a share of requests is throttled,
//! fails with a server error or refused credentials, is delayed, or has its connection dropped; and a per-second
//! timeline of what the proxy saw, for charts. The error answers themselves are the protocol's.

use std::collections::BTreeMap;
use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FaultKind {
    /// The service's throttling error (`RequestLimitExceeded` for EC2, `Throttling` otherwise);
    /// the request does not reach the emulator.
    Throttle,
    /// A 500/503 server error (`InternalError` / `ServiceUnavailable`); not forwarded.
    ServerError {
        /// 500 to 599.
        status: u16,
    },
    /// Forwarded after `millis` of added latency.
    Latency {
        /// Milliseconds added.
        millis: u64,
    },
    /// The connection is closed without an answer; not forwarded.
    Drop,
    /// The service refuses the request's credentials (EC2 `AuthFailure`, 401); not forwarded.
    AuthFailure,
}

/// One rule: requests of `service` (signing name, e.g. `ec2`; `*` or absent: any) and `action`
/// (`*` or absent: any) meet `kind` with probability `rate` (0 to 1).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fault {
    #[serde(default)]
    /// Service (`ec2`…; absent or `*`: any).
    pub service: Option<String>,
    #[serde(default)]
    /// Action (absent or `*`: any).
    pub action: Option<String>,
    #[serde(flatten)]
    /// What happens.
    pub kind: FaultKind,
    #[serde(default = "always")]
    /// Probability, 0 to 1.
    pub rate: f64,
}

fn always() -> f64 {
    1.0
}

impl Fault {
    fn matches(&self, service: &str, action: &str) -> bool {
        let any = |v: &Option<String>, x: &str| v.as_deref().is_none_or(|p| p == "*" || p == x);
        any(&self.service, service) && any(&self.action, action)
    }

    /// Checks the rule; errors name the problem.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.rate) {
            return Err(format!("rate {} is not between 0 and 1", self.rate));
        }
        if let FaultKind::ServerError { status } = self.kind {
            if !(500..=599).contains(&status) {
                return Err(format!("server_error status {status} is not 5xx"));
            }
        }
        Ok(())
    }
}

/// The first rule matching the request whose dice roll (`roll` in [0, 1), one per rule) hits.
pub fn pick<'a>(
    faults: &'a [Fault],
    service: &str,
    action: &str,
    mut roll: impl FnMut() -> f64,
) -> Option<&'a FaultKind> {
    faults
        .iter()
        .filter(|f| f.matches(service, action))
        .find(|f| roll() < f.rate)
        .map(|f| &f.kind)
}

/// The added latency of a fault, if it is one.
pub fn latency(kind: &FaultKind) -> Option<Duration> {
    match kind {
        FaultKind::Latency { millis } => Some(Duration::from_millis(*millis)),
        _ => None,
    }
}

/// What the proxy saw in one second.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Second {
    /// Requests that arrived (including injected failures).
    pub requests: u64,
    /// Requests answered with an injected throttling error.
    pub throttled: u64,
    /// Requests failed or dropped by another injected fault.
    pub failed: u64,
}

/// Per-second counts, keyed by seconds since the Unix epoch.
#[derive(Debug, Default)]
pub struct Timeline {
    seconds: BTreeMap<u64, Second>,
}

/// At most this many seconds are kept (two hours).
const TIMELINE_SECONDS: usize = 7200;

impl Timeline {
    /// Counts one request (and its fault) in `second`.
    pub fn record(&mut self, second: u64, fault: Option<&FaultKind>) {
        let s = self.seconds.entry(second).or_default();
        s.requests += 1;
        match fault {
            Some(FaultKind::Throttle) => s.throttled += 1,
            Some(FaultKind::ServerError { .. } | FaultKind::Drop | FaultKind::AuthFailure) => {
                s.failed += 1
            }
            _ => {}
        }
        while self.seconds.len() > TIMELINE_SECONDS {
            self.seconds.pop_first();
        }
    }

    /// Every second kept.
    pub fn snapshot(&self) -> BTreeMap<u64, Second> {
        self.seconds.clone()
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.seconds.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(json: &str) -> Fault {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn rules_match_by_service_and_action_and_rate() {
        let faults = vec![
            fault(r#"{"service":"ec2","action":"DescribeInstances","kind":"latency","millis":50}"#),
            fault(r#"{"service":"elasticloadbalancing","kind":"throttle","rate":0.3}"#),
            fault(r#"{"kind":"drop","rate":0.0}"#),
        ];
        assert_eq!(
            pick(&faults, "ec2", "DescribeInstances", || 0.99),
            Some(&FaultKind::Latency { millis: 50 })
        );
        assert_eq!(pick(&faults, "ec2", "DescribeVpcs", || 0.0), None);
        assert_eq!(
            pick(
                &faults,
                "elasticloadbalancing",
                "CreateLoadBalancer",
                || 0.29
            ),
            Some(&FaultKind::Throttle)
        );
        assert_eq!(
            pick(
                &faults,
                "elasticloadbalancing",
                "CreateLoadBalancer",
                || 0.3
            ),
            None
        );
        assert!(faults.iter().all(|f| f.validate().is_ok()));
        assert!(fault(r#"{"kind":"throttle","rate":1.5}"#)
            .validate()
            .is_err());
        assert!(fault(r#"{"kind":"server_error","status":404}"#)
            .validate()
            .is_err());
    }

    #[test]
    fn timeline_counts_per_second() {
        let mut t = Timeline::default();
        t.record(10, None);
        t.record(10, Some(&FaultKind::Throttle));
        t.record(11, Some(&FaultKind::Drop));
        let s = t.snapshot();
        assert_eq!(
            s[&10],
            Second {
                requests: 2,
                throttled: 1,
                failed: 0
            }
        );
        assert_eq!(s[&11].failed, 1);
    }
}
