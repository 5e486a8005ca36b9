//! ASG lifecycle hooks, which moto lacks, filled in by the AWS proxy:
//! - `autoscaling:CompleteLifecycleAction` and `RecordLifecycleActionHeartbeat` are answered by
//!   the proxy and recorded (`GET /__stratus/lifecycle-actions`); a completed action's token is
//!   refused afterwards (`ValidationError`), as AWS does.
//! - `POST /__stratus/lifecycle-notify` sends the notification AWS emits when a hooked instance
//!   launches or terminates: an EventBridge event (`aws.autoscaling`, "EC2
//!   Instance-terminate Lifecycle Action") put to moto's EventBridge, whose rules deliver it to
//!   SQS as in AWS. Answers the action's token.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Path of the recorded calls.
pub const ACTIONS_PATH: &str = "/__stratus/lifecycle-actions";
/// Path of the notification trigger.
pub const NOTIFY_PATH: &str = "/__stratus/lifecycle-notify";
/// The calls the proxy answers itself (`service:Action`).
pub const INTERCEPTED: &[&str] = &[
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
];

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleCall {
    /// `CompleteLifecycleAction` or `RecordLifecycleActionHeartbeat`.
    pub action: String,
    /// The Auto Scaling group name.
    pub group: String,
    /// The lifecycle hook name.
    pub hook: String,
    /// The lifecycle action token.
    pub token: String,
    /// The EC2 instance the action is for.
    pub instance_id: String,
    /// `CONTINUE`/`ABANDON` for completions.
    pub result: String,
    /// Unix milliseconds.
    pub at_ms: u64,
    /// Whether the proxy accepted it (false: the action was already completed).
    pub accepted: bool,
}

/// Body of [`NOTIFY_PATH`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notify {
    /// The Auto Scaling group name.
    pub group: String,
    /// The lifecycle hook name.
    pub hook: String,
    /// The EC2 instance in transition.
    pub instance_id: String,
    /// `terminate` or `launch`.
    pub transition: String,
}

/// The calls seen and the completed tokens.
#[derive(Debug, Default)]
pub struct LifecycleState {
    calls: Mutex<Vec<LifecycleCall>>,
}

fn form_value(form: &str, key: &str) -> String {
    form.split('&')
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| decode(v))
        .unwrap_or_default()
}

fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&v[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl LifecycleState {
    /// Answers an intercepted call: `(HTTP status, XML body)`.
    pub fn answer(&self, action: &str, form: &str) -> (u16, String) {
        let call = LifecycleCall {
            action: action.to_owned(),
            group: form_value(form, "AutoScalingGroupName"),
            hook: form_value(form, "LifecycleHookName"),
            token: form_value(form, "LifecycleActionToken"),
            instance_id: form_value(form, "InstanceId"),
            result: form_value(form, "LifecycleActionResult"),
            at_ms: now_ms(),
            accepted: true,
        };
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let done = calls.iter().any(|c| {
            c.action == "CompleteLifecycleAction"
                && c.accepted
                && ((!call.token.is_empty() && c.token == call.token)
                    || (call.token.is_empty()
                        && c.instance_id == call.instance_id
                        && c.hook == call.hook))
        });
        let accepted = !done;
        calls.push(LifecycleCall { accepted, ..call });
        if accepted {
            (
                200,
                format!(
                    "<{action}Response xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><{action}Result/><ResponseMetadata><RequestId>stratus-{}</RequestId></ResponseMetadata></{action}Response>",
                    now_ms()
                ),
            )
        } else {
            (
                400,
                "<ErrorResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>No active Lifecycle Action found with token</Message></Error><RequestId>stratus</RequestId></ErrorResponse>".into(),
            )
        }
    }

    /// The calls recorded so far.
    pub fn calls(&self) -> Vec<LifecycleCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The EventBridge `PutEvents` request body for a hook notification, and the token.
pub fn put_events_body(n: &Notify) -> (String, String) {
    let token = format!("{:032x}", rand::random::<u128>());
    let (detail_type, transition) = if n.transition == "launch" {
        (
            "EC2 Instance-launch Lifecycle Action",
            "autoscaling:EC2_INSTANCE_LAUNCHING",
        )
    } else {
        (
            "EC2 Instance-terminate Lifecycle Action",
            "autoscaling:EC2_INSTANCE_TERMINATING",
        )
    };
    let detail = serde_json::json!({
        "LifecycleActionToken": token,
        "AutoScalingGroupName": n.group,
        "LifecycleHookName": n.hook,
        "EC2InstanceId": n.instance_id,
        "LifecycleTransition": transition,
    });
    let body = serde_json::json!({
        "Entries": [{
            "Source": "aws.autoscaling",
            "DetailType": detail_type,
            "Detail": detail.to_string(),
            "Resources": [format!("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:stratus:autoScalingGroupName/{}", n.group)],
        }]
    });
    (body.to_string(), token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_close_the_action() {
        let s = LifecycleState::default();
        let form = "Action=RecordLifecycleActionHeartbeat&AutoScalingGroupName=asg&LifecycleHookName=hook&LifecycleActionToken=t1&InstanceId=i-1";
        assert_eq!(s.answer("RecordLifecycleActionHeartbeat", form).0, 200);
        let done = "Action=CompleteLifecycleAction&AutoScalingGroupName=asg&LifecycleHookName=hook&LifecycleActionToken=t1&InstanceId=i-1&LifecycleActionResult=CONTINUE";
        assert_eq!(s.answer("CompleteLifecycleAction", done).0, 200);
        assert_eq!(s.answer("RecordLifecycleActionHeartbeat", form).0, 400);
        let calls = s.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[1].result, "CONTINUE");
        assert!(!calls[2].accepted);
        assert_eq!(decode("a%2Fb+c"), "a/b c");
    }

    #[test]
    fn notification_event() {
        let (body, token) = put_events_body(&Notify {
            group: "asg".into(),
            hook: "hook".into(),
            instance_id: "i-1".into(),
            transition: "terminate".into(),
        });
        assert!(body.contains(&token));
        assert!(body.contains("EC2 Instance-terminate Lifecycle Action"));
    }
}
