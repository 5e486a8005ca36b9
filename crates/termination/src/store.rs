//! The IMDS-mode event store (pure; time is an argument): which events are known, which are
//! due for draining (`start − --node-termination-grace-period ≤ now`), which are in progress or
//! done, and when a cancellation lets the node be uncordoned — upstream's
//! `interruptioneventstore` semantics, plus one Spot notice per instance (IMDS re-issues the
//! notice with a moving time, which upstream treats as new events).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use crate::interruption::{InterruptionEvent, Kind};

#[derive(Debug, Clone)]
struct Stored {
    event: InterruptionEvent,
    in_progress: bool,
    processed: bool,
}

/// Known interruption events by id.
#[derive(Debug, Default)]
pub struct EventStore {
    events: BTreeMap<String, Stored>,
    ignored: BTreeSet<String>,
    at_least_one: bool,
}

impl EventStore {
    /// An empty store.
    pub fn new() -> EventStore {
        EventStore::default()
    }

    /// Adds an event unless known (or, for Spot notices, unless one is already known: an
    /// instance is interrupted once). Returns whether it was new.
    pub fn add(&mut self, event: InterruptionEvent) -> bool {
        if self.events.contains_key(&event.event_id) {
            return false;
        }
        if event.kind == Kind::SpotItn
            && self.events.values().any(|s| s.event.kind == Kind::SpotItn)
        {
            return false;
        }
        if !self.ignored.contains(&event.event_id) {
            self.at_least_one = true;
        }
        self.events.insert(
            event.event_id.clone(),
            Stored {
                event,
                in_progress: false,
                processed: false,
            },
        );
        true
    }

    /// Forgets an event (cancelled, or failed so that the next poll retries it).
    pub fn cancel(&mut self, event_id: &str) {
        self.events.remove(event_id);
    }

    /// Events with this id are never drained again (a reboot already handled).
    pub fn ignore(&mut self, event_id: &str) {
        if !event_id.is_empty() {
            self.ignored.insert(event_id.to_owned());
        }
    }

    /// When draining for `event` is due: `grace` before its start.
    pub fn drain_time(event: &InterruptionEvent, grace: Duration) -> Timestamp {
        let grace = jiff::SignedDuration::try_from(grace).unwrap_or(jiff::SignedDuration::MAX);
        event
            .start_time
            .checked_sub(grace)
            .unwrap_or(Timestamp::MIN)
    }

    /// The events due at `now`, marked in progress.
    pub fn take_due(&mut self, now: Timestamp, grace: Duration) -> Vec<InterruptionEvent> {
        let mut due = Vec::new();
        for stored in self.events.values_mut() {
            if self.ignored.contains(&stored.event.event_id)
                || stored.in_progress
                || stored.processed
                || Self::drain_time(&stored.event, grace) > now
            {
                continue;
            }
            stored.in_progress = true;
            due.push(stored.event.clone());
        }
        due
    }

    /// The earliest time an unhandled event becomes due.
    pub fn next_due(&self, grace: Duration) -> Option<Timestamp> {
        self.events
            .values()
            .filter(|s| !s.in_progress && !s.processed && !self.ignored.contains(&s.event.event_id))
            .map(|s| Self::drain_time(&s.event, grace))
            .min()
    }

    /// Records the end of handling `event`: success marks every event of the node processed;
    /// failure forgets the event so that the next poll retries it.
    pub fn finish(&mut self, event: &InterruptionEvent, ok: bool) {
        if ok {
            for stored in self.events.values_mut() {
                if stored.event.node_name == event.node_name {
                    stored.processed = true;
                    stored.in_progress = false;
                }
            }
        } else {
            self.cancel(&event.event_id);
        }
    }

    /// Whether a cancellation leaves nothing that keeps `node` cordoned.
    pub fn should_uncordon(&self, node: &str) -> bool {
        if !self.at_least_one {
            return false;
        }
        !self
            .events
            .values()
            .any(|s| !self.ignored.contains(&s.event.event_id) && s.event.node_name == node)
    }

    /// Number of known events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is known.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str, kind: Kind, start: i64) -> InterruptionEvent {
        let mut e = InterruptionEvent::new(
            id.into(),
            kind,
            kind.imds_monitor(),
            Timestamp::from_second(start).unwrap(),
            String::new(),
        );
        e.node_name = "n1".into();
        e
    }

    const GRACE: Duration = Duration::from_secs(120);

    #[test]
    fn due_after_start_minus_grace() {
        let mut s = EventStore::new();
        assert!(s.add(ev("a", Kind::ScheduledEvent, 1000)));
        assert!(!s.add(ev("a", Kind::ScheduledEvent, 1000)));
        let at = |t| Timestamp::from_second(t).unwrap();
        assert!(s.take_due(at(879), GRACE).is_empty());
        assert_eq!(s.next_due(GRACE), Some(at(880)));
        let due = s.take_due(at(880), GRACE);
        assert_eq!(due.len(), 1);
        assert!(s.take_due(at(900), GRACE).is_empty(), "in progress");
        s.finish(&due[0], true);
        assert!(s.take_due(at(900), GRACE).is_empty(), "processed");
        assert_eq!(s.next_due(GRACE), None);
    }

    #[test]
    fn failure_retries_and_spot_dedupes() {
        let mut s = EventStore::new();
        let now = Timestamp::from_second(10_000).unwrap();
        assert!(s.add(ev("spot-1", Kind::SpotItn, 10_120)));
        assert!(
            !s.add(ev("spot-2", Kind::SpotItn, 10_122)),
            "one notice per instance"
        );
        let due = s.take_due(now, GRACE);
        s.finish(&due[0], false);
        assert!(s.is_empty());
        assert!(
            s.add(ev("spot-2", Kind::SpotItn, 10_122)),
            "retried after a failure"
        );
    }

    #[test]
    fn uncordon_after_last_cancellation() {
        let mut s = EventStore::new();
        assert!(!s.should_uncordon("n1"), "nothing ever happened");
        s.add(ev("a", Kind::ScheduledEvent, 1000));
        s.add(ev("b", Kind::ScheduledEvent, 2000));
        s.cancel("a");
        assert!(!s.should_uncordon("n1"));
        s.cancel("b");
        assert!(s.should_uncordon("n1"));
        s.add(ev("c", Kind::ScheduledEvent, 3000));
        s.ignore("c");
        assert!(s.should_uncordon("n1"), "ignored events do not count");
    }
}
