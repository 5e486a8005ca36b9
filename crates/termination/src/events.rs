//! Kubernetes Events as upstream emits them (`--emit-kubernetes-events`): core/v1 Events from
//! source `aws-node-termination-handler` about Nodes (namespace `default`) and evicted Pods,
//! with upstream's reasons and annotations (instance facts plus
//! `--kubernetes-events-extra-annotations`). Failures are logged, never fatal.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;

use crate::imds::NodeMetadata;
use crate::throttle::Throttle;

/// The Events' `source.component` and `reportingComponent`, as upstream.
pub const COMPONENT: &str = "aws-node-termination-handler";

// Event reasons: upstream's `observability` constants, same strings.
/// Warning: an IMDS monitor failed (once per distinct error).
pub const MONITOR_ERROR: &str = "MonitorError";
/// The node was cordoned (cordon-only action).
pub const CORDON: &str = "Cordon";
/// Warning: cordoning failed.
pub const CORDON_ERROR: &str = "CordonError";
/// The node was cordoned and drained.
pub const CORDON_AND_DRAIN: &str = "CordonAndDrain";
/// Warning: cordoning or draining failed (names the pods not evicted).
pub const CORDON_AND_DRAIN_ERROR: &str = "CordonAndDrainError";
/// The node was uncordoned after a cancelled interruption or a reboot.
pub const UNCORDON: &str = "Uncordon";
/// Warning: uncordoning failed.
pub const UNCORDON_ERROR: &str = "UncordonError";
/// The pre-drain task (reboot labels, `--taint-node` taint) succeeded.
pub const PRE_DRAIN: &str = "PreDrain";
/// Warning: the pre-drain task failed.
pub const PRE_DRAIN_ERROR: &str = "PreDrainError";
/// The post-drain task (completing the ASG lifecycle action, queue mode) succeeded.
pub const POST_DRAIN: &str = "PostDrain";
/// Warning: the post-drain task failed.
pub const POST_DRAIN_ERROR: &str = "PostDrainError";
/// About a Pod: it is being evicted by a drain.
pub const POD_EVICTION: &str = "PodEviction";

/// Parses `k=v,k2=v2` (upstream: exactly one `=` per pair).
pub fn parse_extra_annotations(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    if text.is_empty() {
        return Ok(map);
    }
    for part in text.split(',') {
        let kv: Vec<&str> = part.split('=').collect();
        match kv.as_slice() {
            [k, v] if !k.is_empty() => {
                map.insert((*k).to_owned(), (*v).to_owned());
            }
            _ => return Err(format!("{part:?} is not key=value")),
        }
    }
    Ok(map)
}

/// The annotations of IMDS-mode Events: this instance's facts.
pub fn instance_annotations(m: &NodeMetadata) -> BTreeMap<String, String> {
    [
        ("account-id", &m.account_id),
        ("availability-zone", &m.availability_zone),
        ("instance-id", &m.instance_id),
        ("instance-life-cycle", &m.instance_life_cycle),
        ("instance-type", &m.instance_type),
        ("local-hostname", &m.local_hostname),
        ("local-ipv4", &m.local_ip),
        ("public-hostname", &m.public_hostname),
        ("public-ipv4", &m.public_ip),
        ("region", &m.region),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.clone()))
    .collect()
}

/// Emits Events (a no-op when disabled).
#[derive(Clone)]
pub struct Recorder {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    client: Client,
    throttle: Arc<Throttle>,
    host: String,
    annotations: BTreeMap<String, String>,
}

impl Recorder {
    /// A recorder that emits nothing (`--emit-kubernetes-events=false`).
    pub fn disabled() -> Recorder {
        Recorder { inner: None }
    }

    /// A recorder creating Events through `client` (each call waits on `throttle`), with
    /// `host` (the node name) as `source.host` and `reportingInstance`, and `annotations` on
    /// every Event.
    pub fn new(
        client: Client,
        throttle: Arc<Throttle>,
        host: &str,
        annotations: BTreeMap<String, String>,
    ) -> Recorder {
        Recorder {
            inner: Some(Arc::new(Inner {
                client,
                throttle,
                host: host.to_owned(),
                annotations,
            })),
        }
    }

    /// Whether Events are emitted (callers skip work done only for Events).
    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// An Event about node `node`; `extra` annotations (queue mode: the node's facts) are
    /// added to the configured ones.
    pub async fn node_event(
        &self,
        node: &str,
        warning: bool,
        reason: &str,
        message: String,
        extra: &BTreeMap<String, String>,
    ) {
        let object = ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            namespace: Some("default".into()),
            api_version: Some("v1".into()),
            uid: Some(node.to_owned()),
            ..ObjectReference::default()
        };
        self.emit("default", object, warning, reason, message, extra)
            .await;
    }

    /// A `PodEviction` Event about a pod being evicted from `node` (annotations: the pod's
    /// labels and the node, as upstream).
    pub async fn pod_eviction(
        &self,
        namespace: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
        node: &str,
    ) {
        let object = ObjectReference {
            kind: Some("Pod".into()),
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            api_version: Some("v1".into()),
            ..ObjectReference::default()
        };
        let mut extra = labels.clone();
        extra.insert("node".into(), node.to_owned());
        self.emit(
            namespace,
            object,
            false,
            POD_EVICTION,
            format!("Pod evicted due to node drain (node {node})"),
            &extra,
        )
        .await;
    }

    async fn emit(
        &self,
        namespace: &str,
        object: ObjectReference,
        warning: bool,
        reason: &str,
        message: String,
        extra: &BTreeMap<String, String>,
    ) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut annotations = inner.annotations.clone();
        annotations.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        let now = Time(jiff::Timestamp::now());
        let name = format!(
            "{}.{:016x}",
            object.name.as_deref().unwrap_or("object"),
            rand::random::<u64>()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.to_owned()),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            involved_object: object,
            reason: Some(reason.to_owned()),
            message: Some(message),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: Some(inner.host.clone()),
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: Some(inner.host.clone()),
            ..Event::default()
        };
        inner.throttle.acquire().await;
        let api: Api<Event> = Api::namespaced(inner.client.clone(), namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(reason, error = %e, "could not emit a Kubernetes event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_annotations() {
        assert!(parse_extra_annotations("").unwrap().is_empty());
        let m = parse_extra_annotations("first=annotation,sample.annotation/number=two").unwrap();
        assert_eq!(m["sample.annotation/number"], "two");
        assert!(parse_extra_annotations("a=b=c").is_err());
        assert!(parse_extra_annotations("novalue").is_err());
    }
}
