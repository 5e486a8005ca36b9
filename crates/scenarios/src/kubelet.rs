//! What kubelets do to their Node objects, for benchmarks that keep many nodes alive: each node
//! reports Ready once, then posts its status again every report period (kubelet's
//! `nodeStatusReportFrequency`), with a fresh heartbeat time, spread evenly over the period as
//! independent kubelets are.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The status patch a kubelet sends for a Ready node (strategic merge: conditions merge by
/// type). `since` is when the node became Ready.
pub fn ready_patch(heartbeat: &Time, since: &Time) -> serde_json::Value {
    json!({"status": {"conditions": [{
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
    }]}})
}

/// Reports `name` Ready now (since `since`).
pub async fn report_ready(nodes: &Api<Node>, name: &str, since: &Time) -> anyhow::Result<()> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(&ready_patch(&now, since)),
        )
        .await?;
    Ok(())
}

/// Reports every node of `names` Ready, `concurrency` requests at a time.
pub async fn report_all_ready(
    admin: &Client,
    names: &[String],
    concurrency: usize,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let since = Time(k8s_openapi::jiff::Timestamp::now());
    let results = futures::stream::iter(names)
        .map(|n| report_ready(&nodes, n, &since))
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}

/// Kubelets of many nodes posting their Ready status every report period.
pub struct Kubelets {
    stop: watch::Sender<bool>,
    task: JoinHandle<KubeletStats>,
}

/// What the kubelets did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeletStats {
    /// Status posts that succeeded.
    pub reports: u64,
    /// Status posts that failed (a node deleted meanwhile, an apiserver hiccup).
    pub failures: u64,
}

impl Kubelets {
    /// Starts posting: node `i` of `names` reports at `i / len` of each `period`.
    pub fn start(admin: &Client, names: Vec<String>, period: Duration) -> Kubelets {
        let (stop, mut stopped) = watch::channel(false);
        let nodes: Api<Node> = Api::all(admin.clone());
        let names: Arc<[String]> = names.into();
        let task = tokio::spawn(async move {
            let mut stats = KubeletStats::default();
            if names.is_empty() {
                return stats;
            }
            let since = Time(k8s_openapi::jiff::Timestamp::now());
            let step = period / names.len() as u32;
            let mut next = Instant::now() + step;
            let mut i = 0;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {}
                    _ = stopped.wait_for(|s| *s) => return stats,
                }
                match report_ready(&nodes, &names[i], &since).await {
                    Ok(()) => stats.reports += 1,
                    Err(_) => stats.failures += 1,
                }
                i = (i + 1) % names.len();
                // A slow apiserver delays the next report rather than piling them up.
                next = (next + step).max(Instant::now());
            }
        });
        Kubelets { stop, task }
    }

    /// Stops posting; what was posted.
    pub async fn stop(self) -> KubeletStats {
        self.stop.send_replace(true);
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_is_a_ready_condition_with_both_times() {
        let t = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let p = ready_patch(&t, &t);
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["type"], "Ready");
        assert_eq!(c["status"], "True");
        assert_eq!(c["lastHeartbeatTime"], "1970-01-01T00:00:00Z");
        assert_eq!(c["lastTransitionTime"], "1970-01-01T00:00:00Z");
    }
}
