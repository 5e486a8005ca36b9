//! Coalesced node churn: one signal per settled change of the load-balancer target set.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;
use tokio::time::Instant;

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;

use super::plan::target_nodes;

/// Hash of the target set (names, provider IDs, labels, addresses) of the cached nodes.
pub fn target_fingerprint<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> u64 {
    let mut h = DefaultHasher::new();
    for t in target_nodes(nodes) {
        t.name.hash(&mut h);
        t.provider_id.hash(&mut h);
        t.labels.hash(&mut h);
        t.addresses.hash(&mut h);
    }
    h.finish()
}

/// Decides when a changed fingerprint is worth a signal: after it has held still for `quiet`,
/// or after `max_delay` of continuous change. Pure, driven by [`Debouncer::observe`].
#[derive(Debug)]
pub struct Debouncer {
    quiet: Duration,
    max_delay: Duration,
    signalled: u64,
    latest: u64,
    changed_at: Option<Instant>,
    first_pending: Option<Instant>,
}

impl Debouncer {
    /// Starts from the fingerprint already acted upon.
    pub fn new(initial: u64, quiet: Duration, max_delay: Duration) -> Self {
        Self {
            quiet,
            max_delay,
            signalled: initial,
            latest: initial,
            changed_at: None,
            first_pending: None,
        }
    }

    /// Feeds the current fingerprint; returns whether to signal now.
    pub fn observe(&mut self, fingerprint: u64, now: Instant) -> bool {
        if fingerprint != self.latest {
            self.latest = fingerprint;
            self.changed_at = Some(now);
        }
        if self.latest == self.signalled {
            self.changed_at = None;
            self.first_pending = None;
            return false;
        }
        let first = *self.first_pending.get_or_insert(now);
        let settled = self
            .changed_at
            .is_none_or(|at| now.duration_since(at) >= self.quiet);
        if settled || now.duration_since(first) >= self.max_delay {
            self.signalled = self.latest;
            self.changed_at = None;
            self.first_pending = None;
            return true;
        }
        false
    }
}

/// A stream yielding `()` once per settled change of the target set.
pub fn node_changes(
    store: Store<Node>,
    poll: Duration,
    quiet: Duration,
    max_delay: Duration,
) -> impl Stream<Item = ()> + Send {
    let initial = target_fingerprint(store.state().iter().map(|n| n.as_ref()));
    let debouncer = Debouncer::new(initial, quiet, max_delay);
    futures::stream::unfold((store, debouncer), move |(store, mut d)| async move {
        let mut tick = tokio::time::interval(poll);
        loop {
            tick.tick().await;
            let fp = target_fingerprint(store.state().iter().map(|n| n.as_ref()));
            if d.observe(fp, Instant::now()) {
                tracing::debug!("target node set changed; updating load balancers");
                return Some(((), (store, d)));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(10);

    #[test]
    fn a_burst_gives_one_signal_after_it_settles() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(0, Q, MAX);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(!d.observe(0, at(0)));
        let mut signals = 0;
        // 20 changes, 100 ms apart, then quiet.
        for i in 1..=20u64 {
            signals += d.observe(i, at(i * 100)) as u32;
        }
        for ms in (2100..5000).step_by(250) {
            signals += d.observe(20, at(ms)) as u32;
        }
        assert_eq!(signals, 1);
    }

    #[test]
    fn endless_churn_still_signals_by_the_deadline() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(0, Q, MAX);
        let mut first = None;
        for i in 1..200u64 {
            if d.observe(i, t0 + Duration::from_millis(i * 100)) {
                first = Some(i * 100);
                break;
            }
        }
        // Pending since the first change at 100 ms; the deadline is 10 s later.
        assert_eq!(first, Some(10_100));
    }

    #[test]
    fn a_change_undone_before_it_settles_is_no_signal() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(7, Q, MAX);
        assert!(!d.observe(8, t0));
        assert!(!d.observe(7, t0 + Duration::from_millis(300)));
        assert!(!d.observe(7, t0 + Duration::from_secs(5)));
    }
}
