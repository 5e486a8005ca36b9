//! Pure conversion of IMDS answers into interruption events, with upstream's event ids (so the
//! `aws-node-termination-handler/event-id` label and taint values stay the same).

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::imds::{InstanceAction, RebalanceRecommendation, ScheduledEventDetail};
use crate::interruption::{InterruptionEvent, Kind};

/// Scheduled event codes after which the node comes back (uncordon after the reboot).
const RESTART_CODES: &[&str] = &[
    "instance-stop",
    "instance-retirement",
    "instance-reboot",
    "system-reboot",
];

/// Why an IMDS answer could not be turned into an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct ParseError {
    /// Which field could not be parsed, e.g. `"scheduled event time"`.
    pub what: &'static str,
    /// The text found and why it is not valid.
    pub message: String,
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A Spot interruption notice. Upstream's id hashes Go's `%v` of the notice
/// (`&{terminate 2026-01-01T00:00:00Z}`).
pub fn spot_itn(action: &InstanceAction, node_name: &str) -> Result<InterruptionEvent, ParseError> {
    let time: Timestamp = action.time.parse().map_err(|e| ParseError {
        what: "spot instance-action time",
        message: format!("{:?}: {e}", action.time),
    })?;
    let id = format!(
        "spot-itn-{}",
        sha256_hex(&format!("&{{{} {}}}", action.action, action.time))
    );
    let mut event = InterruptionEvent::new(
        id,
        Kind::SpotItn,
        Kind::SpotItn.imds_monitor(),
        time,
        format!(
            "Spot ITN received. Instance will be interrupted at {} \n",
            action.time
        ),
    );
    event.node_name = node_name.to_owned();
    // The instance is stopped, hibernated or terminated at this time.
    event.deadline = Some(time);
    Ok(event)
}

/// A rebalance recommendation (no deadline: the instance is at elevated risk, not going).
pub fn rebalance(
    rec: &RebalanceRecommendation,
    node_name: &str,
) -> Result<InterruptionEvent, ParseError> {
    let time: Timestamp = rec.notice_time.parse().map_err(|e| ParseError {
        what: "rebalance recommendation noticeTime",
        message: format!("{:?}: {e}", rec.notice_time),
    })?;
    let id = format!(
        "rebalance-recommendation-{}",
        sha256_hex(&format!("&{{{}}}", rec.notice_time))
    );
    let mut event = InterruptionEvent::new(
        id,
        Kind::RebalanceRecommendation,
        Kind::RebalanceRecommendation.imds_monitor(),
        time,
        format!(
            "Rebalance recommendation received. Instance will be cordoned at {} \n",
            rec.notice_time
        ),
    );
    event.node_name = node_name.to_owned();
    Ok(event)
}

/// The ASG target lifecycle state: an event only for `Terminated`. Upstream hashes the poll
/// time into the id, making a new event every poll; the id here is stable per instance, so
/// the node is handled once.
pub fn asg_target_state(
    state: &str,
    instance_id: &str,
    node_name: &str,
    now: Timestamp,
) -> Option<InterruptionEvent> {
    if state != "Terminated" {
        return None;
    }
    let id = format!(
        "target-lifecycle-state-terminated-{}",
        sha256_hex(&format!("{state}:{instance_id}"))
    );
    let mut event = InterruptionEvent::new(
        id,
        Kind::AsgLifecycle,
        Kind::AsgLifecycle.imds_monitor(),
        now,
        "ASG target lifecycle state received. Instance will be terminated\n".into(),
    );
    event.node_name = node_name.to_owned();
    event.instance_id = instance_id.to_owned();
    Some(event)
}

/// Upstream's scheduled-event time layout: `21 Jan 2019 09:00:43 GMT`.
pub fn parse_scheduled_time(text: &str) -> Result<Timestamp, ParseError> {
    let err = |message: String| ParseError {
        what: "scheduled event time",
        message: format!("{text:?}: {message}"),
    };
    let trimmed = text.trim();
    let without_zone = trimmed
        .strip_suffix(" GMT")
        .ok_or_else(|| err("expected a GMT time like \"21 Jan 2019 09:00:43 GMT\"".into()))?;
    let civil = jiff::civil::DateTime::strptime("%d %b %Y %H:%M:%S", without_zone)
        .map_err(|e| err(e.to_string()))?;
    civil
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map(|z| z.timestamp())
        .map_err(|e| err(e.to_string()))
}

/// One scheduled maintenance event; `canceled`/`completed` ones come back as cancellations.
pub fn scheduled(
    detail: &ScheduledEventDetail,
    node_name: &str,
) -> Result<InterruptionEvent, ParseError> {
    let not_before = parse_scheduled_time(&detail.not_before)?;
    let not_after = parse_scheduled_time(&detail.not_after).unwrap_or(not_before);
    let mut event = InterruptionEvent::new(
        detail.event_id.clone(),
        Kind::ScheduledEvent,
        Kind::ScheduledEvent.imds_monitor(),
        not_before,
        format!(
            "{} will occur between {} and {} because {}\n",
            detail.code, detail.not_before, detail.not_after, detail.description
        ),
    );
    event.state = detail.state.clone();
    event.end_time = Some(not_after);
    event.node_name = node_name.to_owned();
    event.deadline = Some(not_before);
    event.restart =
        RESTART_CODES.contains(&detail.code.as_str()) && !is_cancellation(&detail.state);
    Ok(event)
}

/// Whether a scheduled event state means the event is off.
pub fn is_cancellation(state: &str) -> bool {
    state == "canceled" || state == "completed"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spot_ids_match_upstream_hash() {
        let action = InstanceAction {
            action: "terminate".into(),
            time: "2026-11-22T22:50:29Z".into(),
        };
        let e = spot_itn(&action, "n1").unwrap();
        // sha256("&{terminate 2026-11-22T22:50:29Z}")
        assert_eq!(
            e.event_id,
            format!(
                "spot-itn-{}",
                hex::encode(Sha256::digest(b"&{terminate 2026-11-22T22:50:29Z}"))
            )
        );
        assert_eq!(e.deadline, Some("2026-11-22T22:50:29Z".parse().unwrap()));
        assert_eq!(e.node_name, "n1");
        assert!(spot_itn(
            &InstanceAction {
                action: "terminate".into(),
                time: "soon".into()
            },
            "n1"
        )
        .is_err());
    }

    #[test]
    fn scheduled_times_and_restarts() {
        let t = parse_scheduled_time("21 Jan 2019 09:00:43 GMT").unwrap();
        assert_eq!(t, "2019-01-21T09:00:43Z".parse().unwrap());
        let t = parse_scheduled_time("2 Jan 2019 09:00:43 GMT").unwrap();
        assert_eq!(t, "2019-01-02T09:00:43Z".parse().unwrap());
        assert!(parse_scheduled_time("2019-01-02").is_err());
        let table = [
            ("system-reboot", "active", true),
            ("instance-stop", "active", true),
            ("system-maintenance", "active", false),
            ("system-reboot", "canceled", false),
        ];
        for (code, state, restart) in table {
            let detail = ScheduledEventDetail {
                not_before: "21 Jan 2019 09:00:43 GMT".into(),
                code: code.into(),
                description: "scheduled reboot".into(),
                event_id: "instance-event-1".into(),
                not_after: "21 Jan 2019 09:17:23 GMT".into(),
                state: state.into(),
            };
            let e = scheduled(&detail, "n").unwrap();
            assert_eq!(e.restart, restart, "{code} {state}");
            assert_eq!(e.event_id, "instance-event-1");
            assert_eq!(e.end_time, Some("2019-01-21T09:17:23Z".parse().unwrap()));
        }
    }

    #[test]
    fn asg_state_only_terminated() {
        let now = Timestamp::UNIX_EPOCH;
        assert!(asg_target_state("InService", "i-1", "n", now).is_none());
        assert!(asg_target_state("", "i-1", "n", now).is_none());
        let a = asg_target_state("Terminated", "i-1", "n", now).unwrap();
        let b = asg_target_state(
            "Terminated",
            "i-1",
            "n",
            now + jiff::SignedDuration::from_secs(5),
        )
        .unwrap();
        assert_eq!(a.event_id, b.event_id, "stable across polls");
    }
}
