//! The diff between wanted and registered targets: what to register and what to deregister,
//! never the whole set again. Draining targets count as gone (wanted again → registered again).

use std::collections::BTreeSet;
use std::time::Duration;

use stratus_aws_api::elbv2::{TargetHealthState, TargetRef};

/// Target changes of one reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetChanges {
    /// Wanted and not registered.
    pub register: Vec<TargetRef>,
    /// Registered and not wanted.
    pub deregister: Vec<TargetRef>,
}

impl TargetChanges {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.register.is_empty() && self.deregister.is_empty()
    }
}

/// The registered targets that still take traffic (not draining).
pub fn active(health: &[TargetHealthState]) -> BTreeSet<TargetRef> {
    health
        .iter()
        .filter(|h| h.state != "draining")
        .map(|h| h.target.clone())
        .collect()
}

/// The changes taking `registered` to `wanted`.
pub fn plan_targets(
    wanted: &BTreeSet<TargetRef>,
    registered: &BTreeSet<TargetRef>,
) -> TargetChanges {
    TargetChanges {
        register: wanted.difference(registered).cloned().collect(),
        deregister: registered.difference(wanted).cloned().collect(),
    }
}

/// Coalescing of endpoint churn for one binding: apply once the wanted targets have been quiet
/// for `quiet`, or once the oldest unapplied change is `max_delay` old (so continuous churn
/// still lands). `None`: apply now; `Some(d)`: look again in `d`. Times are arguments, so this
/// is a table test.
pub fn coalesce(
    now: Duration,
    pending_since: Duration,
    last_change: Duration,
    quiet: Duration,
    max_delay: Duration,
) -> Option<Duration> {
    let quiet_at = last_change + quiet;
    let deadline = pending_since + max_delay;
    let due = quiet_at.min(deadline);
    (now < due).then(|| due - now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<TargetRef> {
        ids.iter()
            .map(|id| TargetRef {
                id: id.to_string(),
                port: 80,
            })
            .collect()
    }

    #[test]
    fn only_the_difference() {
        /// wanted, registered → register, deregister.
        type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case] = &[
            (&["a", "b"], &[], &["a", "b"], &[]),
            (&["a", "b"], &["a", "b"], &[], &[]),
            (&["a", "c"], &["a", "b"], &["c"], &["b"]),
            (&[], &["a"], &[], &["a"]),
        ];
        for (wanted, registered, reg, dereg) in cases {
            let c = plan_targets(&set(wanted), &set(registered));
            assert_eq!(c.register, set(reg).into_iter().collect::<Vec<_>>());
            assert_eq!(c.deregister, set(dereg).into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn draining_targets_are_not_active() {
        let h = |id: &str, state: &str| TargetHealthState {
            target: TargetRef {
                id: id.into(),
                port: 80,
            },
            state: state.into(),
        };
        let got = active(&[h("a", "healthy"), h("b", "draining"), h("c", "initial")]);
        assert_eq!(got, set(&["a", "c"]));
    }

    #[test]
    fn churn_waits_for_quiet_but_never_past_the_deadline() {
        let ms = Duration::from_millis;
        let (quiet, max) = (ms(500), ms(2000));
        // A single change: applied once quiet.
        assert_eq!(coalesce(ms(0), ms(0), ms(0), quiet, max), Some(ms(500)));
        assert_eq!(coalesce(ms(500), ms(0), ms(0), quiet, max), None);
        // Changes every 200 ms keep pushing the quiet point...
        assert_eq!(
            coalesce(ms(1800), ms(0), ms(1800), quiet, max),
            Some(ms(200))
        );
        // ...but not past the deadline.
        assert_eq!(coalesce(ms(2000), ms(0), ms(2000), quiet, max), None);
        // No coalescing at all when both are zero.
        assert_eq!(coalesce(ms(7), ms(7), ms(7), ms(0), ms(0)), None);
    }
}
