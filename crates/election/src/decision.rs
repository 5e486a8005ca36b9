//! Pure decisions of a candidate: take, renew or wait, from what it has observed of the lease.

use std::time::Duration;
use tokio::time::Instant;

/// The fields of a Lease that matter to an election.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseView {
    /// `spec.holderIdentity`; `None` or empty when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration_seconds: i32,
    /// `spec.renewTime`, as text (compared only for change).
    pub renew_time: Option<String>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl LeaseView {
    fn held_by(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// What a candidate last saw, and when it last saw it *change* (client-go's observed time:
/// expiry is judged on the candidate's clock, so clock skew between nodes does not matter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The Lease as last read.
    pub lease: LeaseView,
    /// When (on our clock) its holder or renew time last changed.
    pub changed_at: Instant,
}

impl Observation {
    /// Folds a fresh read into the observation: the time moves only when the lease changed.
    pub fn update(previous: Option<&Observation>, lease: LeaseView, now: Instant) -> Observation {
        match previous {
            Some(p) if p.lease == lease => p.clone(),
            _ => Observation {
                lease,
                changed_at: now,
            },
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease object: create it, holding it.
    Create,
    /// The lease is free or expired: take it over.
    Take,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds it and renews it: wait.
    Wait,
}

/// Decides for candidate `me`.
pub fn decide(me: &str, observed: Option<&Observation>, now: Instant) -> Decision {
    let Some(o) = observed else {
        return Decision::Create;
    };
    match o.lease.held_by() {
        Some(h) if h == me => Decision::Renew,
        None => Decision::Take,
        Some(_) => {
            let duration = Duration::from_secs(o.lease.duration_seconds.max(1) as u64);
            if now.duration_since(o.changed_at) >= duration {
                Decision::Take
            } else {
                Decision::Wait
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renew: &str) -> LeaseView {
        LeaseView {
            holder: holder.map(str::to_string),
            duration_seconds: 15,
            renew_time: Some(renew.into()),
            transitions: 0,
        }
    }

    #[test]
    fn free_missing_own_and_foreign_leases() {
        let t0 = Instant::now();
        assert_eq!(decide("me", None, t0), Decision::Create);
        let free = Observation::update(None, lease(None, "1"), t0);
        assert_eq!(decide("me", Some(&free), t0), Decision::Take);
        let released = Observation::update(None, lease(Some(""), "1"), t0);
        assert_eq!(decide("me", Some(&released), t0), Decision::Take);
        let mine = Observation::update(None, lease(Some("me"), "1"), t0);
        assert_eq!(decide("me", Some(&mine), t0), Decision::Renew);
        let theirs = Observation::update(None, lease(Some("other"), "1"), t0);
        assert_eq!(decide("me", Some(&theirs), t0), Decision::Wait);
    }

    #[test]
    fn expiry_is_judged_on_our_clock_from_the_last_change() {
        let t0 = Instant::now();
        let o = Observation::update(None, lease(Some("other"), "1"), t0);
        // Unchanged reads do not move the observed time…
        let later = t0 + Duration::from_secs(10);
        let o = Observation::update(Some(&o), lease(Some("other"), "1"), later);
        assert_eq!(o.changed_at, t0);
        assert_eq!(decide("me", Some(&o), later), Decision::Wait);
        assert_eq!(
            decide("me", Some(&o), t0 + Duration::from_secs(15)),
            Decision::Take
        );
        // …a renewal does.
        let renewed = Observation::update(Some(&o), lease(Some("other"), "2"), later);
        assert_eq!(renewed.changed_at, later);
        assert_eq!(
            decide("me", Some(&renewed), t0 + Duration::from_secs(15)),
            Decision::Wait
        );
    }
}
