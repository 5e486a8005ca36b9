//! The interruption event model shared by both modes: kinds, ids, times, and what to do about
//! an event (cordon only, or cordon and drain), as upstream's `monitor.InterruptionEvent`.

use std::collections::BTreeMap;

use jiff::Timestamp;

/// What kind of interruption (upstream's `*Kind` constants, shown to webhooks as `.Kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A Spot interruption notice (IMDS `spot/instance-action`, or EventBridge's "EC2 Spot
    /// Instance Interruption Warning"): the instance goes two minutes later.
    SpotItn,
    /// EC2 scheduled maintenance (IMDS `events/maintenance/scheduled`, or an AWS Health
    /// scheduled change for EC2).
    ScheduledEvent,
    /// An EC2 rebalance recommendation: elevated interruption risk, no deadline.
    RebalanceRecommendation,
    /// An EC2 instance state-change notification into a draining state (queue mode).
    StateChange,
    /// An ASG termination: a terminate lifecycle hook (queue mode) or the IMDS target
    /// lifecycle state `Terminated`.
    AsgLifecycle,
    /// An ASG launch lifecycle hook (queue mode): completed once the node is Ready.
    AsgLaunchLifecycle,
}

impl Kind {
    /// Upstream's kind string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::SpotItn => "SPOT_ITN",
            Kind::ScheduledEvent => "SCHEDULED_EVENT",
            Kind::RebalanceRecommendation => "REBALANCE_RECOMMENDATION",
            Kind::StateChange => "STATE_CHANGE",
            Kind::AsgLifecycle => "ASG_LIFECYCLE",
            Kind::AsgLaunchLifecycle => "ASG_LAUNCH_LIFECYCLE",
        }
    }

    /// The IMDS monitor that reports this kind (upstream's monitor kinds; also the
    /// `event_error_where` label of `events_error_total`).
    pub fn imds_monitor(self) -> &'static str {
        match self {
            Kind::SpotItn => "SPOT_ITN_MONITOR",
            Kind::ScheduledEvent => "SCHEDULED_EVENT",
            Kind::RebalanceRecommendation => "REBALANCE_RECOMMENDATION_MONITOR",
            Kind::AsgLifecycle => "ASG_LIFECYCLE_MONITOR",
            Kind::StateChange | Kind::AsgLaunchLifecycle => SQS_MONITOR,
        }
    }

    /// The taint this kind puts on a node with `--taint-node`.
    pub fn taint_key(self) -> Option<&'static str> {
        match self {
            Kind::SpotItn => Some(crate::node::SPOT_ITN_TAINT),
            Kind::ScheduledEvent => Some(crate::node::SCHEDULED_MAINTENANCE_TAINT),
            Kind::AsgLifecycle => Some(crate::node::ASG_LIFECYCLE_TERMINATION_TAINT),
            Kind::RebalanceRecommendation => Some(crate::node::REBALANCE_RECOMMENDATION_TAINT),
            Kind::StateChange | Kind::AsgLaunchLifecycle => None,
        }
    }
}

/// The queue monitor's kind.
pub const SQS_MONITOR: &str = "SQS_MONITOR";

/// An ASG lifecycle action to complete (and heartbeat) for this event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleAction {
    /// The Auto Scaling group's name (`AutoScalingGroupName`).
    pub group: String,
    /// The lifecycle hook's name (`LifecycleHookName`).
    pub hook: String,
    /// The action's token (`LifecycleActionToken`).
    pub token: String,
    /// The EC2 instance the action is about (`EC2InstanceId`).
    pub instance_id: String,
}

/// One interruption of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptionEvent {
    /// Upstream's event id (e.g. `spot-itn-<sha256>`, an IMDS `instance-event-...`,
    /// `asg-lifecycle-term-<hex>`): the key that makes an event handled once.
    pub event_id: String,
    /// What kind of interruption.
    pub kind: Kind,
    /// `SPOT_ITN_MONITOR`, `SQS_MONITOR`, ...
    pub monitor: &'static str,
    /// Upstream's human-readable description (Events, webhooks, logs).
    pub description: String,
    /// Scheduled events: `active`, `canceled`, `completed`.
    pub state: String,
    /// The instance's Auto Scaling group, if known (queue mode; empty otherwise).
    pub auto_scaling_group_name: String,
    /// The Node the event applies to (empty until resolved in queue mode).
    pub node_name: String,
    /// The Node's labels, shown to webhooks as `.NodeLabels` (no source fills them yet).
    pub node_labels: BTreeMap<String, String>,
    /// Names of the pods on the node before the drain (webhooks' `.Pods`; listed only when a
    /// webhook or Events are enabled).
    pub pods: Vec<String>,
    /// The EC2 instance id (empty in IMDS mode for Spot, rebalance and scheduled events: the
    /// node's own instance).
    pub instance_id: String,
    /// The Node's `aws:///<zone>/<instance-id>` provider id (queue mode).
    pub provider_id: String,
    /// The EC2 instance type (queue mode).
    pub instance_type: String,
    /// Whether the instance carries `--managed-tag` (always true unless
    /// `--check-tag-before-draining`); webhooks' `.IsManaged`.
    pub is_managed: bool,
    /// When the interruption starts (drains begin `--node-termination-grace-period` earlier).
    pub start_time: Timestamp,
    /// Scheduled events: the end of the maintenance window (`NotAfter`).
    pub end_time: Option<Timestamp>,
    /// When the instance is expected to be gone, if known: the drain is fitted to end before.
    pub deadline: Option<Timestamp>,
    /// A scheduled reboot or stop: the node is uncordoned after the reboot.
    pub restart: bool,
    /// The ASG lifecycle action this event belongs to (queue mode).
    pub lifecycle: Option<LifecycleAction>,
}

impl InterruptionEvent {
    /// A fresh event with the fields every source sets.
    pub fn new(
        event_id: String,
        kind: Kind,
        monitor: &'static str,
        start_time: Timestamp,
        description: String,
    ) -> InterruptionEvent {
        InterruptionEvent {
            event_id,
            kind,
            monitor,
            description,
            state: String::new(),
            auto_scaling_group_name: String::new(),
            node_name: String::new(),
            node_labels: BTreeMap::new(),
            pods: Vec::new(),
            instance_id: String::new(),
            provider_id: String::new(),
            instance_type: String::new(),
            is_managed: true,
            start_time,
            end_time: None,
            deadline: None,
            restart: false,
            lifecycle: None,
        }
    }

    /// Upstream tells rebalance recommendations apart by their id.
    pub fn is_rebalance_recommendation(&self) -> bool {
        self.kind == Kind::RebalanceRecommendation
            || self.event_id.contains("rebalance-recommendation")
    }

    /// The Kubernetes Event reason of this interruption (upstream's `GetReasonForKind`; in log
    /// format version 1 every queue event is `SQSTermination`).
    pub fn reason(&self, log_format_version: i64) -> &'static str {
        if log_format_version < 2 && self.monitor == SQS_MONITOR {
            return "SQSTermination";
        }
        match self.kind {
            Kind::ScheduledEvent => "ScheduledEvent",
            Kind::SpotItn => "SpotInterruption",
            Kind::RebalanceRecommendation => "RebalanceRecommendation",
            Kind::StateChange => "StateChange",
            Kind::AsgLifecycle => "ASGLifecycle",
            Kind::AsgLaunchLifecycle => "UnknownInterruption",
        }
    }
}

/// What to do with a node for an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Cordon (and label/taint) the node, leave its pods.
    Cordon,
    /// Cordon the node, then evict its pods before the deadline.
    CordonAndDrain,
}

/// Upstream's rule: cordon only with `--cordon-only`, or for an IMDS rebalance recommendation
/// without `--enable-rebalance-draining`; drain otherwise.
pub fn action_for(
    event: &InterruptionEvent,
    cordon_only: bool,
    queue_mode: bool,
    rebalance_draining: bool,
) -> Action {
    if cordon_only || (!queue_mode && event.is_rebalance_recommendation() && !rebalance_draining) {
        Action::Cordon
    } else {
        Action::CordonAndDrain
    }
}

/// Go's `time.Time.String()` for a UTC time, as webhooks templates print `.StartTime`.
pub fn go_time_string(t: Timestamp) -> String {
    let nanos = t.subsec_nanosecond();
    let fraction = if nanos == 0 {
        String::new()
    } else {
        let digits = format!(".{nanos:09}");
        digits.trim_end_matches('0').to_owned()
    };
    format!("{}{} +0000 UTC", t.strftime("%Y-%m-%d %H:%M:%S"), fraction)
}

/// Go's `fmt.Sprintf("%x", s)` of a string: its bytes in lowercase hex (upstream builds queue
/// event ids this way).
pub fn go_hex(s: &str) -> String {
    hex::encode(s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, monitor: &'static str, id: &str) -> InterruptionEvent {
        InterruptionEvent::new(
            id.into(),
            kind,
            monitor,
            Timestamp::UNIX_EPOCH,
            String::new(),
        )
    }

    #[test]
    fn actions_follow_upstream_rules() {
        let spot = event(Kind::SpotItn, "SPOT_ITN_MONITOR", "spot-itn-1");
        let rebalance = event(
            Kind::RebalanceRecommendation,
            "REBALANCE_RECOMMENDATION_MONITOR",
            "rebalance-recommendation-1",
        );
        let cases = [
            (&spot, false, false, false, Action::CordonAndDrain),
            (&spot, true, false, false, Action::Cordon),
            (&rebalance, false, false, false, Action::Cordon),
            (&rebalance, false, false, true, Action::CordonAndDrain),
            (&rebalance, false, true, false, Action::CordonAndDrain),
        ];
        for (e, cordon_only, queue, drain, want) in cases {
            assert_eq!(action_for(e, cordon_only, queue, drain), want, "{e:?}");
        }
    }

    #[test]
    fn reasons_by_format_version() {
        let q = event(Kind::SpotItn, SQS_MONITOR, "x");
        assert_eq!(q.reason(1), "SQSTermination");
        assert_eq!(q.reason(2), "SpotInterruption");
        let i = event(Kind::ScheduledEvent, "SCHEDULED_EVENT", "x");
        assert_eq!(i.reason(1), "ScheduledEvent");
    }

    #[test]
    fn go_formats() {
        let t: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(go_time_string(t), "2026-01-02 03:04:05 +0000 UTC");
        let t: Timestamp = "2026-01-02T03:04:05.25Z".parse().unwrap();
        assert_eq!(go_time_string(t), "2026-01-02 03:04:05.25 +0000 UTC");
        assert_eq!(go_hex("ab"), "6162");
    }
}
