//! Queue mode (a Deployment, one leader): long-polls the SQS queue EventBridge feeds, resolves
//! each message's instance through the batched instance cache and its node through a watched
//! node store (no API call per message), handles it with up to `--workers` at once, and
//! deletes the message only once the node is handled (lifecycle action completed). Errors are
//! retried with backoff; nothing makes the process exit.

pub mod instances;
pub mod messages;
pub mod nodes;
pub mod sqs;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::Message;
use jiff::Timestamp;
use tokio::sync::{Mutex, Semaphore};

use crate::handler::{HandleError, Handler};
use instances::Instances;
use messages::{decide, DecideSettings, Parsed, Verdict};
use nodes::NodeIndex;
use sqs::{Lifecycle, Queue};

/// Receivers polling the queue at once.
const RECEIVERS: usize = 4;

/// The queue-mode runner.
#[derive(Clone)]
pub struct QueueMode {
    pub(crate) handler: Handler,
    pub(crate) queue: Queue,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) instances: Instances,
    pub(crate) nodes: NodeIndex,
}

impl QueueMode {
    /// Runs until `shutdown` completes.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let opts = self.handler.opts.clone();
        self.nodes.wait_synced().await;
        let ids = self.nodes.instance_ids();
        tracing::info!(nodes = ids.len(), "prefetching the cluster's instances");
        if let Err(e) = self.instances.prefetch(ids).await {
            tracing::warn!(error = %e, "prefetching instances failed; lookups will load them");
        }
        let in_flight: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let workers = Arc::new(Semaphore::new(opts.workers.max(1) as usize));
        let background = tokio::spawn(self.clone().refresh_loop());
        let receivers = futures::future::join_all((0..RECEIVERS).map(|_| {
            self.clone()
                .receive_loop(in_flight.clone(), workers.clone())
        }));
        tokio::select! {
            _ = shutdown => {}
            _ = receivers => {}
        }
        background.abort();
        let _ = workers.acquire_many(opts.workers.max(1) as u32).await;
        tracing::info!("queue processing stopped");
    }

    /// Keeps the instance cache warm for new nodes and the tagged gauges current.
    async fn refresh_loop(self) {
        let mut ticker = tokio::time::interval(Duration::from_secs(30));
        loop {
            ticker.tick().await;
            let ids = self.nodes.instance_ids();
            if let Err(e) = self.instances.prefetch(ids.clone()).await {
                tracing::debug!(error = %e, "instance refresh failed");
            }
            let tag = &self.handler.opts.managed_tag;
            let tagged = self.instances.count_tagged(tag).await;
            self.handler.metrics.tagged_instances.set(tagged as i64);
            let mut nodes = 0;
            for id in &ids {
                if self.instances.is_tagged(id, tag).await {
                    nodes += 1;
                }
            }
            self.handler.metrics.tagged_nodes.set(nodes);
        }
    }

    async fn receive_loop(
        self,
        in_flight: Arc<Mutex<BTreeMap<String, String>>>,
        workers: Arc<Semaphore>,
    ) {
        let mut failures: u32 = 0;
        loop {
            let messages = match self.queue.receive().await {
                Ok(m) => {
                    failures = 0;
                    m
                }
                Err(e) => {
                    failures += 1;
                    self.handler.metrics.error(crate::interruption::SQS_MONITOR);
                    let delay = Duration::from_millis(500 * 2u64.pow(failures.min(6)))
                        .min(Duration::from_secs(30));
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "receiving from SQS failed");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            for message in messages {
                let (Some(id), Some(receipt)) =
                    (message.message_id.clone(), message.receipt_handle.clone())
                else {
                    continue;
                };
                {
                    let mut flight = in_flight.lock().await;
                    if let Some(handle) = flight.get_mut(&id) {
                        // Redelivered while still handled: keep the newest receipt handle.
                        *handle = receipt;
                        continue;
                    }
                    flight.insert(id.clone(), receipt);
                }
                let permit = workers.clone().acquire_owned().await;
                let this = self.clone();
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let seen = tokio::time::Instant::now();
                    let delete = this.process(&message, seen).await;
                    let receipt = in_flight.lock().await.remove(&id);
                    if delete {
                        if let Some(receipt) = receipt {
                            this.queue.delete(receipt);
                        }
                    }
                });
            }
        }
    }

    /// Handles one message; returns whether it may be deleted.
    async fn process(&self, message: &Message, seen: tokio::time::Instant) -> bool {
        let metrics = &self.handler.metrics;
        let body = message.body.as_deref().unwrap_or_default();
        let candidates = match messages::parse(body, Timestamp::now()) {
            Ok(Parsed::Candidates(c)) => c,
            Ok(Parsed::NotActionable(why)) => {
                tracing::debug!(why = %why, "dropping a non-actionable message");
                metrics.queue_message("dropped");
                return true;
            }
            Err(e) => {
                tracing::warn!(error = %e, "dropping an unreadable message");
                metrics.error(crate::interruption::SQS_MONITOR);
                metrics.queue_message("dropped");
                return true;
            }
        };
        let ids: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
        let infos = match self.instances.lookup(&ids).await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(error = %e, "looking up instances failed; the message will be retried");
                metrics.error(crate::interruption::SQS_MONITOR);
                metrics.queue_message("retried");
                return false;
            }
        };
        let opts = &self.handler.opts;
        let settings = DecideSettings {
            check_tag: opts.check_tag_before_draining,
            managed_tag: opts.managed_tag.clone(),
            delete_if_node_not_found: opts.delete_sqs_msg_if_node_not_found,
            use_provider_id: opts.use_provider_id,
        };
        let mut delete = true;
        for candidate in candidates {
            let info = infos.get(&candidate.instance_id).cloned().flatten();
            let node = info
                .as_ref()
                .and_then(|i| self.nodes.find(i, opts.use_provider_id));
            match decide(candidate, info.as_ref(), node.as_ref(), &settings) {
                Verdict::Drop(why) => {
                    tracing::info!(why = %why, "dropping the message");
                    metrics.queue_message("dropped");
                }
                Verdict::Retry(why) => {
                    tracing::info!(why = %why, "leaving the message for a later try");
                    metrics.queue_message("retried");
                    delete = false;
                }
                Verdict::CompleteOnly(action, why) => {
                    tracing::info!(why = %why, instance = %action.instance_id, "completing the lifecycle action");
                    match self.lifecycle.complete(&action).await {
                        Ok(()) => metrics.queue_message("handled"),
                        Err(e) => {
                            tracing::warn!(error = %e, "completing the lifecycle action failed");
                            metrics.queue_message("retried");
                            delete = false;
                        }
                    }
                }
                Verdict::Handle(event) => {
                    if !self.handle(*event, seen).await {
                        delete = false;
                    }
                }
            }
        }
        delete
    }

    /// Drains for one event, with heartbeats and lifecycle completion; true when done.
    async fn handle(
        &self,
        mut event: crate::interruption::InterruptionEvent,
        seen: tokio::time::Instant,
    ) -> bool {
        let opts = &self.handler.opts;
        let metrics = &self.handler.metrics;
        let annotations = self.nodes.annotations(&event.node_name);
        self.handler
            .recorder
            .node_event(
                &event.node_name,
                false,
                event.reason(opts.log_format_version),
                event.description.clone(),
                &annotations,
            )
            .await;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let heartbeats = match (&event.lifecycle, opts.heartbeat_interval) {
            (Some(action), interval) if interval > 0 => {
                let lifecycle = self.lifecycle.clone();
                let action = action.clone();
                let until = Duration::from_secs(opts.heartbeat_until.max(interval) as u64);
                Some(tokio::spawn(async move {
                    lifecycle
                        .heartbeats(action, Duration::from_secs(interval as u64), until, stop_rx)
                        .await
                }))
            }
            _ => None,
        };
        let result = self.handler.handle(&mut event, &annotations, seen).await;
        let done = match &result {
            Ok(()) => true,
            Err(HandleError::NodeNotFound(node)) => {
                tracing::warn!(node = %node, "node gone while handling");
                opts.delete_sqs_msg_if_node_not_found
            }
            Err(e) => {
                tracing::error!(event_id = %event.event_id, error = %e, "handling the interruption failed");
                false
            }
        };
        let mut completed = true;
        if done {
            if let Some(action) = &event.lifecycle {
                if opts.complete_lifecycle_action_delay_seconds > 0 {
                    tokio::time::sleep(Duration::from_secs(
                        opts.complete_lifecycle_action_delay_seconds as u64,
                    ))
                    .await;
                }
                match self.lifecycle.complete(action).await {
                    Ok(()) => {
                        tracing::info!(instance = %action.instance_id, hook = %action.hook, "completed the ASG lifecycle hook");
                        self.handler
                            .recorder
                            .node_event(
                                &event.node_name,
                                false,
                                crate::events::POST_DRAIN,
                                "Post-drain task successfully executed".into(),
                                &annotations,
                            )
                            .await;
                        metrics.action("post-drain", true);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "completing the lifecycle action failed");
                        self.handler
                            .recorder
                            .node_event(
                                &event.node_name,
                                true,
                                crate::events::POST_DRAIN_ERROR,
                                format!("There was a problem executing the post-drain task: {e}"),
                                &annotations,
                            )
                            .await;
                        metrics.action("post-drain", false);
                        completed = false;
                    }
                }
            }
        }
        let _ = stop_tx.send(());
        if let Some(h) = heartbeats {
            let _ = h.await;
        }
        let ok = done && completed;
        metrics.queue_message(if ok { "handled" } else { "retried" });
        ok
    }
}
