//! The diff between wanted and registered targets: what to register and what to deregister,
//! never the whole set again. Draining targets count as gone (wanted again → registered again).

use std::collections::BTreeSet;

use stratus_aws::lb::elbv2_api::{TargetHealthState, TargetRef};

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
}
