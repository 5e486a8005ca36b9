//! Publishing Kubernetes Events about Nodes and Services (events.k8s.io/v1, aggregated by kube's
//! Recorder).

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};

/// Publishes Events for one controller.
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    /// A publisher reporting as `controller` (e.g. `cloud-node-controller`).
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_string(),
            instance: std::env::var("HOSTNAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publishes an Event; failures are logged, never fatal.
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let reference = object.object_ref(&());
        self.publish_ref(&reference, warning, reason, action, note)
            .await;
    }

    /// Publishes an Event regarding `reference` (an object of any kind, typed or not); failures
    /// are logged, never fatal.
    pub async fn publish_ref(
        &self,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(truncate(note, 1000)),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, reference).await {
            tracing::warn!(object = reference.name.as_deref().unwrap_or(""), reason, error = %e, "could not publish event");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}
