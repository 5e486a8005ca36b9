//! Uncordon after a scheduled reboot (pure decision plus the uptime reader): the node carries
//! `aws-node-termination-handler/action=UncordonAfterReboot` and the label time; if the system
//! has been up for less time than has passed since the label, the reboot happened.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::node::{ACTION_LABEL, ACTION_TIME_LABEL, EVENT_ID_LABEL, UNCORDON_AFTER_REBOOT};

/// What to do with a node at start-up about a scheduled reboot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No reboot action recorded on the node.
    Nothing,
    /// Recorded, but the system has not restarted since.
    NotYet,
    /// The system restarted after the label was set: uncordon the node and drop the labels.
    Uncordon {
        /// The scheduled event's id from the node's event-id label (empty without one).
        event_id: String,
    },
}

/// Decides from the node's labels, the time and the uptime in seconds.
pub fn decide(labels: &BTreeMap<String, String>, now: Timestamp, uptime_seconds: i64) -> Decision {
    if labels.get(ACTION_LABEL).map(String::as_str) != Some(UNCORDON_AFTER_REBOOT) {
        return Decision::Nothing;
    }
    let Some(labelled_at) = labels
        .get(ACTION_TIME_LABEL)
        .and_then(|v| v.parse::<i64>().ok())
    else {
        return Decision::Nothing;
    };
    if now.as_second() - labelled_at < uptime_seconds {
        return Decision::NotYet;
    }
    Decision::Uncordon {
        event_id: labels.get(EVENT_ID_LABEL).cloned().unwrap_or_default(),
    }
}

/// Seconds since boot, from `/proc/uptime` or `--uptime-from-file`.
pub fn read_uptime(file: &str) -> Result<i64, String> {
    let path = if file.is_empty() {
        "/proc/uptime"
    } else {
        file
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    text.split_whitespace()
        .next()
        .and_then(|first| first.parse::<f64>().ok())
        .map(|s| s as i64)
        .ok_or_else(|| format!("{path}: no uptime in {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(action: &str, time: &str) -> BTreeMap<String, String> {
        [
            (ACTION_LABEL, action),
            (ACTION_TIME_LABEL, time),
            (EVENT_ID_LABEL, "instance-event-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn table() {
        let now = Timestamp::from_second(10_000).unwrap();
        let cases = [
            (BTreeMap::new(), 5, Decision::Nothing),
            (labels("Other", "9000"), 5, Decision::Nothing),
            (labels(UNCORDON_AFTER_REBOOT, "x"), 5, Decision::Nothing),
            (
                labels(UNCORDON_AFTER_REBOOT, "9000"),
                5_000,
                Decision::NotYet,
            ),
            (
                labels(UNCORDON_AFTER_REBOOT, "9000"),
                500,
                Decision::Uncordon {
                    event_id: "instance-event-1".into(),
                },
            ),
        ];
        for (l, uptime, want) in cases {
            assert_eq!(decide(&l, now, uptime), want, "{l:?} {uptime}");
        }
    }
}
