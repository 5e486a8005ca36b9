//! SQS message bodies (pure): EventBridge events (Spot interruption, rebalance recommendation,
//! EC2 state change, AWS Health scheduled change, ASG lifecycle launch/terminate) and direct
//! ASG lifecycle-hook notifications (raw or SNS-wrapped) become candidate events with upstream's
//! ids; [`decide`] turns a candidate plus what is known about its instance and node into a verdict.

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;
use stratus_runtime::redact;

use crate::interruption::{go_hex, InterruptionEvent, Kind, LifecycleAction, SQS_MONITOR};

const TERMINATING: &str = "autoscaling:EC2_INSTANCE_TERMINATING";
const LAUNCHING: &str = "autoscaling:EC2_INSTANCE_LAUNCHING";
const TEST_NOTIFICATION: &str = "autoscaling:TEST_NOTIFICATION";
const STATES_TO_DRAIN: &[&str] = &["stopping", "stopped", "shutting-down", "terminated"];
/// A Spot instance is interrupted two minutes after the warning.
pub const SPOT_WARNING: SignedDuration = SignedDuration::from_secs(120);

#[derive(Debug, Deserialize)]
struct EventBridgeEvent {
    #[serde(default)]
    id: String,
    #[serde(rename = "detail-type", default)]
    detail_type: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    time: String,
    #[serde(default)]
    detail: serde_json::Value,
}

#[derive(Debug, Default, Deserialize)]
struct LifecycleDetail {
    #[serde(rename = "LifecycleActionToken", default)]
    token: String,
    #[serde(rename = "AutoScalingGroupName", default)]
    group: String,
    #[serde(rename = "LifecycleHookName", default)]
    hook: String,
    #[serde(rename = "EC2InstanceId", default)]
    instance_id: String,
    #[serde(rename = "LifecycleTransition", default)]
    transition: String,
    #[serde(rename = "Event", default)]
    event: String,
    #[serde(rename = "RequestId", default)]
    request_id: String,
    #[serde(rename = "Time", default)]
    time: String,
}

/// A message before its instance is looked up.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The EC2 instance the message is about.
    pub instance_id: String,
    /// The event, without its node yet (filled by [`decide`]).
    pub event: InterruptionEvent,
}

/// What a message body holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// One candidate per affected instance (several for an AWS Health event).
    Candidates(Vec<Candidate>),
    /// Nothing to do (test notification, a state not drained, another service): delete it.
    NotActionable(String),
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable message: {0}")]
pub struct ParseError(pub String);

fn time_or(text: &str, now: Timestamp) -> Timestamp {
    text.parse().unwrap_or(now)
}

/// Reads one message body at `now`.
pub fn parse(body: &str, now: Timestamp) -> Result<Parsed, ParseError> {
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ParseError(format!("not JSON: {}", redact::json(&e))))?;
    if value
        .get("detail-type")
        .and_then(|v| v.as_str())
        .is_some_and(|s| !s.is_empty())
    {
        let event: EventBridgeEvent =
            serde_json::from_value(value).map_err(|e| ParseError(redact::json(&e)))?;
        return from_event_bridge(event, now);
    }
    // A lifecycle hook notification, possibly wrapped by SNS in "Message".
    let inner = match value.get("Message") {
        Some(serde_json::Value::String(s)) => serde_json::from_str(s)
            .map_err(|e| ParseError(format!("Message: {}", redact::json(&e))))?,
        Some(other) => other.clone(),
        None => value,
    };
    let detail: LifecycleDetail =
        serde_json::from_value(inner).map_err(|e| ParseError(redact::json(&e)))?;
    if detail.event == TEST_NOTIFICATION || detail.transition == TEST_NOTIFICATION {
        return Ok(Parsed::NotActionable("ASG test notification".into()));
    }
    if detail.transition != TERMINATING && detail.transition != LAUNCHING {
        return Err(ParseError(format!(
            "lifecycle transition must be {TERMINATING} or {LAUNCHING}, got {:?}",
            detail.transition
        )));
    }
    let id = detail.request_id.clone();
    let time = detail.time.clone();
    Ok(Parsed::Candidates(vec![lifecycle(
        detail,
        &id,
        time_or(&time, now),
    )]))
}

fn lifecycle(detail: LifecycleDetail, id: &str, time: Timestamp) -> Candidate {
    let launch = detail.transition == LAUNCHING;
    let (kind, description) = if launch {
        (
            Kind::AsgLaunchLifecycle,
            format!("ASG Lifecycle Launch event received. Instance was started at {time} \n"),
        )
    } else {
        (
            Kind::AsgLifecycle,
            format!("ASG Lifecycle Termination event received. Instance will be interrupted at {time} \n"),
        )
    };
    let mut event = InterruptionEvent::new(
        format!("asg-lifecycle-term-{}", go_hex(id)),
        kind,
        SQS_MONITOR,
        time,
        description,
    );
    event.auto_scaling_group_name = detail.group.clone();
    event.instance_id = detail.instance_id.clone();
    event.lifecycle = Some(LifecycleAction {
        group: detail.group,
        hook: detail.hook,
        token: detail.token,
        instance_id: detail.instance_id.clone(),
    });
    Candidate {
        instance_id: detail.instance_id,
        event,
    }
}

fn from_event_bridge(e: EventBridgeEvent, now: Timestamp) -> Result<Parsed, ParseError> {
    let time = time_or(&e.time, now);
    let field = |name: &str| {
        e.detail
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let single = |kind: Kind, prefix: &str, instance_id: String, description: String| {
        let mut event = InterruptionEvent::new(
            format!("{prefix}-{}", go_hex(&e.id)),
            kind,
            SQS_MONITOR,
            time,
            description,
        );
        event.instance_id = instance_id.clone();
        Parsed::Candidates(vec![Candidate { instance_id, event }])
    };
    match (e.source.as_str(), e.detail_type.as_str()) {
        ("aws.autoscaling", _) => {
            let detail: LifecycleDetail = serde_json::from_value(e.detail.clone())
                .map_err(|x| ParseError(redact::json(&x)))?;
            if detail.event == TEST_NOTIFICATION || detail.transition == TEST_NOTIFICATION {
                return Ok(Parsed::NotActionable("ASG test notification".into()));
            }
            if detail.transition != TERMINATING && detail.transition != LAUNCHING {
                return Ok(Parsed::NotActionable(format!(
                    "lifecycle transition {:?}",
                    detail.transition
                )));
            }
            Ok(Parsed::Candidates(vec![lifecycle(detail, &e.id, time)]))
        }
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            let id = field("instance-id");
            let Parsed::Candidates(mut c) = single(
                Kind::SpotItn,
                "spot-itn-event",
                id.clone(),
                format!("Spot Interruption notice for instance {id} was sent at {time} \n"),
            ) else {
                unreachable!()
            };
            c[0].event.deadline = time.checked_add(SPOT_WARNING).ok();
            Ok(Parsed::Candidates(c))
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            let id = field("instance-id");
            Ok(single(
                Kind::RebalanceRecommendation,
                "rebalance-recommendation-event",
                id.clone(),
                format!("Rebalance recommendation event received. Instance {id} will be cordoned at {time} \n"),
            ))
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let id = field("instance-id");
            let state = field("state");
            if !STATES_TO_DRAIN.contains(&state.to_ascii_lowercase().as_str()) {
                return Ok(Parsed::NotActionable(format!("instance state {state:?}")));
            }
            let Parsed::Candidates(mut c) = single(
                Kind::StateChange,
                "ec2-state-change-event",
                id.clone(),
                format!(
                    "EC2 State Change event received. Instance {id} went into {state} at {time} \n"
                ),
            ) else {
                unreachable!()
            };
            // The instance is already on its way down.
            c[0].event.deadline = Some(now.max(time));
            c[0].event.state = state;
            Ok(Parsed::Candidates(c))
        }
        ("aws.health", "AWS Health Event") => {
            let service = field("service");
            let category = field("eventTypeCategory");
            if service != "EC2" || category != "scheduledChange" {
                return Ok(Parsed::NotActionable(format!(
                    "AWS Health event of service {service:?}, category {category:?}"
                )));
            }
            let entities = e
                .detail
                .get("affectedEntities")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            let candidates = entities
                .iter()
                .filter_map(|x| x.get("entityValue").and_then(|v| v.as_str()))
                .map(|instance_id| {
                    let mut event = InterruptionEvent::new(
                        format!("aws-health-scheduled-change-event-{}", go_hex(&e.id)),
                        Kind::ScheduledEvent,
                        SQS_MONITOR,
                        now,
                        format!("AWS Health scheduled change event received. Instance {instance_id} will be interrupted at {time} \n"),
                    );
                    event.instance_id = instance_id.to_owned();
                    Candidate {
                        instance_id: instance_id.to_owned(),
                        event,
                    }
                })
                .collect();
            Ok(Parsed::Candidates(candidates))
        }
        (source, detail_type) => Ok(Parsed::NotActionable(format!(
            "unsupported event {source:?} {detail_type:?}"
        ))),
    }
}

/// What EC2 says about an instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstanceInfo {
    /// `InstanceId`.
    pub instance_id: String,
    /// `PrivateDnsName`: how the node is found without `--use-provider-id`.
    pub private_dns_name: String,
    /// `Placement.AvailabilityZone`.
    pub availability_zone: String,
    /// `InstanceType`.
    pub instance_type: String,
    /// `State.Name` (`running`, `stopping`, ...); not read by [`decide`].
    pub state: String,
    /// The instance's tags, key to value.
    pub tags: std::collections::BTreeMap<String, String>,
}

impl InstanceInfo {
    /// The Node `spec.providerID` of this instance, `aws:///<zone>/<instance-id>` (empty
    /// without a zone).
    pub fn provider_id(&self) -> String {
        if self.availability_zone.is_empty() {
            String::new()
        } else {
            format!("aws:///{}/{}", self.availability_zone, self.instance_id)
        }
    }
}

/// The node found for an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// The Node's name.
    pub name: String,
    /// Whether its `Ready` condition is `True` (an ASG launch hook waits for it).
    pub ready: bool,
}

/// What to do with a message's candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Cordon/drain the node, then complete the lifecycle action (if any), then delete.
    Handle(Box<InterruptionEvent>),
    /// Complete the lifecycle action without touching a node, then delete.
    CompleteOnly(LifecycleAction, String),
    /// Delete the message; nothing to do.
    Drop(String),
    /// Leave the message: it comes back after its visibility timeout.
    Retry(String),
}

/// The settings [`decide`] reads.
#[derive(Debug, Clone)]
pub struct DecideSettings {
    /// `--check-tag-before-draining` (default true): drop messages about instances without
    /// `managed_tag`.
    pub check_tag: bool,
    /// `--managed-tag` (default `aws-node-termination-handler/managed`).
    pub managed_tag: String,
    /// `--delete-sqs-msg-if-node-not-found` (default false): drop, instead of retrying, a
    /// message whose instance has no node.
    pub delete_if_node_not_found: bool,
    /// `--use-provider-id`; not read by [`decide`] (the node is looked up before it).
    pub use_provider_id: bool,
}

/// Decides about a candidate given its instance (None: EC2 does not know it) and node.
pub fn decide(
    candidate: Candidate,
    instance: Option<&InstanceInfo>,
    node: Option<&NodeRef>,
    s: &DecideSettings,
) -> Verdict {
    let mut event = candidate.event;
    let Some(info) = instance else {
        return Verdict::Drop(format!("no instance {} in EC2", candidate.instance_id));
    };
    let tagged = info.tags.contains_key(&s.managed_tag);
    if s.check_tag && !tagged {
        return Verdict::Drop(format!(
            "instance {} is not tagged {} (not managed here)",
            info.instance_id, s.managed_tag
        ));
    }
    event.is_managed = !s.check_tag || tagged;
    event.provider_id = info.provider_id();
    event.instance_type = info.instance_type.clone();
    if event.auto_scaling_group_name.is_empty() {
        event.auto_scaling_group_name = info
            .tags
            .get("aws:autoscaling:groupName")
            .cloned()
            .unwrap_or_default();
    }
    let Some(node) = node else {
        let lifecycle = event.lifecycle.clone();
        return match (event.kind, lifecycle) {
            // The instance goes and no node ever joined: continue the hook anyway.
            (Kind::AsgLifecycle, Some(action)) if tagged || s.delete_if_node_not_found => {
                Verdict::CompleteOnly(action, format!("instance {} has no node", info.instance_id))
            }
            (Kind::AsgLaunchLifecycle, _) => {
                Verdict::Retry(format!("instance {} has not joined yet", info.instance_id))
            }
            _ if s.delete_if_node_not_found => {
                Verdict::Drop(format!("no node for instance {}", info.instance_id))
            }
            _ => Verdict::Retry(format!("no node for instance {}", info.instance_id)),
        };
    };
    event.node_name = node.name.clone();
    if event.kind == Kind::AsgLaunchLifecycle {
        return match event.lifecycle.clone() {
            Some(action) if node.ready => {
                Verdict::CompleteOnly(action, format!("node {} is ready", node.name))
            }
            Some(_) => Verdict::Retry(format!("node {} is not ready yet", node.name)),
            None => Verdict::Drop("launch event without a lifecycle action".into()),
        };
    }
    Verdict::Handle(Box::new(event))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-06-01T00:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn candidates(body: &str) -> Vec<Candidate> {
        match parse(body, now()).unwrap() {
            Parsed::Candidates(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn event_bridge_kinds_and_ids() {
        let spot = r#"{"version":"0","id":"1e5527d7","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-06-01T00:00:10Z","detail":{"instance-id":"i-1","instance-action":"terminate"}}"#;
        let c = candidates(spot);
        assert_eq!(c[0].event.kind, Kind::SpotItn);
        assert_eq!(
            c[0].event.event_id,
            format!("spot-itn-event-{}", hex::encode("1e5527d7"))
        );
        assert_eq!(
            c[0].event.deadline,
            Some("2026-06-01T00:02:10Z".parse().unwrap())
        );
        let state = r#"{"id":"a","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-06-01T00:00:00Z","detail":{"instance-id":"i-2","state":"stopping"}}"#;
        assert_eq!(candidates(state)[0].event.kind, Kind::StateChange);
        let pending = state.replace("stopping", "pending");
        assert!(matches!(
            parse(&pending, now()),
            Ok(Parsed::NotActionable(_))
        ));
        let health = r#"{"id":"h","detail-type":"AWS Health Event","source":"aws.health","time":"2026-06-01T00:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-3"},{"entityValue":"i-4"}]}}"#;
        let c = candidates(health);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].instance_id, "i-4");
        let rebalance = r#"{"id":"r","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2026-06-01T00:00:00Z","detail":{"instance-id":"i-5"}}"#;
        assert_eq!(
            candidates(rebalance)[0].event.kind,
            Kind::RebalanceRecommendation
        );
        let other = r#"{"id":"x","detail-type":"Something","source":"aws.s3","detail":{}}"#;
        assert!(matches!(parse(other, now()), Ok(Parsed::NotActionable(_))));
        assert!(parse("nope", now()).is_err());
    }

    #[test]
    fn lifecycle_messages() {
        let eb = r#"{"id":"782d","detail-type":"EC2 Instance-terminate Lifecycle Action","source":"aws.autoscaling","time":"2026-06-01T00:00:00Z","detail":{"LifecycleActionToken":"tok","AutoScalingGroupName":"asg","LifecycleHookName":"hook","EC2InstanceId":"i-6","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}}"#;
        let c = candidates(eb);
        assert_eq!(c[0].event.kind, Kind::AsgLifecycle);
        assert_eq!(c[0].event.lifecycle.as_ref().unwrap().token, "tok");
        let direct = r#"{"LifecycleActionToken":"t2","AutoScalingGroupName":"asg","LifecycleHookName":"hook","EC2InstanceId":"i-7","LifecycleTransition":"autoscaling:EC2_INSTANCE_LAUNCHING","RequestId":"req","Time":"2026-06-01T00:00:00Z"}"#;
        let c = candidates(direct);
        assert_eq!(c[0].event.kind, Kind::AsgLaunchLifecycle);
        assert_eq!(
            c[0].event.event_id,
            format!("asg-lifecycle-term-{}", hex::encode("req"))
        );
        let sns = serde_json::json!({ "Message": direct }).to_string();
        assert_eq!(candidates(&sns)[0].instance_id, "i-7");
        let test = r#"{"Event":"autoscaling:TEST_NOTIFICATION","AutoScalingGroupName":"asg"}"#;
        assert!(matches!(parse(test, now()), Ok(Parsed::NotActionable(_))));
    }

    fn settings() -> DecideSettings {
        DecideSettings {
            check_tag: true,
            managed_tag: "aws-node-termination-handler/managed".into(),
            delete_if_node_not_found: false,
            use_provider_id: false,
        }
    }

    fn info(tagged: bool) -> InstanceInfo {
        let mut tags = std::collections::BTreeMap::new();
        if tagged {
            tags.insert("aws-node-termination-handler/managed".into(), String::new());
        }
        InstanceInfo {
            instance_id: "i-6".into(),
            private_dns_name: "ip-10-0-0-6.ec2.internal".into(),
            availability_zone: "us-east-1a".into(),
            instance_type: "m5.large".into(),
            state: "running".into(),
            tags,
        }
    }

    #[test]
    fn verdict_table() {
        let term = r#"{"id":"782d","detail-type":"EC2 Instance-terminate Lifecycle Action","source":"aws.autoscaling","detail":{"LifecycleActionToken":"tok","AutoScalingGroupName":"asg","LifecycleHookName":"hook","EC2InstanceId":"i-6","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}}"#;
        let launch = term.replace("TERMINATING", "LAUNCHING");
        let spot = r#"{"id":"s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-6"}}"#;
        let node = NodeRef {
            name: "n6".into(),
            ready: true,
        };
        let unready = NodeRef {
            name: "n6".into(),
            ready: false,
        };
        let lenient = DecideSettings {
            delete_if_node_not_found: true,
            ..settings()
        };
        let untagged_ok = DecideSettings {
            check_tag: false,
            ..settings()
        };
        let v = |body: &str, i: Option<InstanceInfo>, n: Option<&NodeRef>, s: &DecideSettings| {
            let c = candidates(body).remove(0);
            match decide(c, i.as_ref(), n, s) {
                Verdict::Handle(_) => "handle",
                Verdict::CompleteOnly(..) => "complete",
                Verdict::Drop(_) => "drop",
                Verdict::Retry(_) => "retry",
            }
        };
        let cases = [
            (
                v(term, Some(info(true)), Some(&node), &settings()),
                "handle",
            ),
            (v(term, Some(info(false)), Some(&node), &settings()), "drop"),
            (v(term, Some(info(true)), None, &settings()), "complete"),
            (v(term, Some(info(false)), None, &untagged_ok), "retry"),
            (
                v(
                    term,
                    Some(info(false)),
                    None,
                    &DecideSettings {
                        check_tag: false,
                        ..lenient.clone()
                    },
                ),
                "complete",
            ),
            (v(term, None, None, &settings()), "drop"),
            (
                v(&launch, Some(info(true)), Some(&node), &settings()),
                "complete",
            ),
            (
                v(&launch, Some(info(true)), Some(&unready), &settings()),
                "retry",
            ),
            (v(&launch, Some(info(true)), None, &settings()), "retry"),
            (v(spot, Some(info(true)), None, &settings()), "retry"),
            (v(spot, Some(info(true)), None, &lenient), "drop"),
            (
                v(spot, Some(info(true)), Some(&node), &settings()),
                "handle",
            ),
        ];
        for (i, (got, want)) in cases.iter().enumerate() {
            assert_eq!(got, want, "case {i}");
        }
        let c = candidates(spot).remove(0);
        let Verdict::Handle(e) = decide(c, Some(&info(true)), Some(&node), &settings()) else {
            panic!()
        };
        assert_eq!(e.node_name, "n6");
        assert_eq!(e.provider_id, "aws:///us-east-1a/i-6");
    }
}
