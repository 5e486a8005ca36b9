//! Waiting for pods on the real node: every pod matching a selector Running with all
//! containers ready; a container that restarts or waits in a failing state fails the wait with
//! the pod's status and the container's log (current and previous).

use std::time::Duration;

use tokio::time::Instant;

use anyhow::{bail, Result};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, LogParams};

/// States of a waiting container that mean the pod will not start by itself.
const FAILING: &[&str] = &[
    "CrashLoopBackOff",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "RunContainerError",
];

/// Waits until at least `count` pods match `selector` in `namespace` and all are Running and
/// Ready; returns them.
pub async fn wait_ready(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
    count: usize,
    deadline: Duration,
) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let until = Instant::now() + deadline;
    loop {
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await?
            .items;
        for pod in &list {
            if let Some(reason) = failing(pod) {
                bail!("{}", describe_failure(&pods, pod, &reason).await);
            }
        }
        if list.len() >= count && list.iter().all(is_ready) {
            return Ok(list);
        }
        if Instant::now() >= until {
            let mut report = format!(
                "pods {selector} in {namespace} not ready after {deadline:?} ({} found)",
                list.len()
            );
            for pod in &list {
                report.push('\n');
                report.push_str(&describe_failure(&pods, pod, "not ready").await);
            }
            report.push_str(&recent_events(client, namespace).await);
            bail!("{report}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether the pod is Running with every container ready.
pub fn is_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Why a container of the pod will not come up by itself, if one will not: a failing waiting
/// reason, a restart, or a terminated container in a pod that restarts it.
pub fn failing(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    for container in status.container_statuses.iter().flatten() {
        if let Some(waiting) = container.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let message = waiting.message.as_deref().unwrap_or_default();
            if let Some(reason) = waiting
                .reason
                .as_deref()
                .filter(|r| FAILING.contains(r) && !transient(r, message))
            {
                return Some(format!(
                    "container {} is {reason}: {}",
                    container.name,
                    waiting.message.clone().unwrap_or_default()
                ));
            }
        }
        if container.restart_count > 0 {
            return Some(format!(
                "container {} restarted {} times",
                container.name, container.restart_count
            ));
        }
    }
    None
}

/// A failing state the kubelet leaves by itself: its Secret and ConfigMap caches not synced in
/// time (`CreateContainerConfigError: failed to sync secret cache: timed out waiting for the
/// condition`, seen on a loaded machine) is retried, unlike a missing Secret or key.
fn transient(reason: &str, message: &str) -> bool {
    reason == "CreateContainerConfigError" && message.starts_with("failed to sync")
}

/// The last lines of every container's log of the pods matching `selector`, for a failure
/// message.
pub async fn logs(client: &kube::Client, namespace: &str, selector: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = pods.list(&ListParams::default().labels(selector)).await else {
        return format!("(cannot list pods {selector})");
    };
    let mut report = String::new();
    for pod in &list.items {
        report.push_str(&describe_failure(&pods, pod, "log").await);
        report.push('\n');
    }
    report
}

/// The namespace's events, oldest first (why a controller made no pod, why one is pending).
pub async fn recent_events(client: &kube::Client, namespace: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = events.list(&ListParams::default()).await else {
        return String::new();
    };
    let mut report = format!("\nevents in {namespace}:");
    for event in list.items.iter().rev().take(30).rev() {
        report.push_str(&format!(
            "\n  {} {}/{}: {} {}",
            event.type_.as_deref().unwrap_or_default(),
            event.involved_object.kind.as_deref().unwrap_or_default(),
            event.involved_object.name.as_deref().unwrap_or_default(),
            event.reason.as_deref().unwrap_or_default(),
            event.message.as_deref().unwrap_or_default()
        ));
    }
    report
}

async fn describe_failure(pods: &Api<Pod>, pod: &Pod, reason: &str) -> String {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut report = format!(
        "pod {name}: {reason}\nstatus: {}",
        serde_json::to_string(&pod.status).unwrap_or_default()
    );
    let containers = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
        })
        .map(|c| c.name.clone())
        .collect::<Vec<_>>();
    for container in containers {
        for previous in [false, true] {
            let params = LogParams {
                container: Some(container.clone()),
                previous,
                tail_lines: Some(40),
                ..LogParams::default()
            };
            if let Ok(log) = pods.logs(&name, &params).await {
                let which = if previous { "previous" } else { "current" };
                report.push_str(&format!("\n--- {container} ({which}) log:\n{log}"));
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(reason: &str, message: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "status": {"containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn an_unsynced_secret_cache_is_waited_out_and_a_missing_secret_fails() {
        let unsynced = waiting(
            "CreateContainerConfigError",
            "failed to sync secret cache: timed out waiting for the condition",
        );
        assert_eq!(failing(&unsynced), None);
        let missing = waiting("CreateContainerConfigError", "secret \"x\" not found");
        assert!(failing(&missing).unwrap().contains("not found"));
        assert!(failing(&waiting("CrashLoopBackOff", "back-off")).is_some());
    }
}
