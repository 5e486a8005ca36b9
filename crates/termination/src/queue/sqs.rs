//! The SQS and Auto Scaling seam: long-poll receives (10 messages, 20 s wait, the configured
//! visibility timeout), deletes batched ten at a time, lifecycle completion and heartbeats —
//! every call through the shared AWS call guard (rate limiter, retries, metrics).

use std::time::Duration;

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use stratus_aws_api::AwsApi;
use stratus_cloud::CloudError;
use tokio::sync::mpsc;

use crate::interruption::LifecycleAction;

/// How long deletes wait to share a DeleteMessageBatch.
const DELETE_WINDOW: Duration = Duration::from_millis(100);

/// The queue.
#[derive(Clone)]
pub struct Queue {
    client: aws_sdk_sqs::Client,
    api: AwsApi,
    url: String,
    visibility: i32,
    deletes: mpsc::UnboundedSender<String>,
}

impl Queue {
    /// Starts the delete batcher on the current runtime.
    pub fn start(client: aws_sdk_sqs::Client, api: AwsApi, url: String, visibility: i32) -> Queue {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(delete_batcher(client.clone(), api.clone(), url.clone(), rx));
        Queue {
            client,
            api,
            url,
            visibility,
            deletes: tx,
        }
    }

    /// One long poll.
    pub async fn receive(&self) -> Result<Vec<Message>, CloudError> {
        let out = self
            .api
            .call("ReceiveMessage", || {
                self.client
                    .receive_message()
                    .queue_url(&self.url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(20)
                    .visibility_timeout(self.visibility)
                    .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                    .message_attribute_names("All")
                    .send()
            })
            .await?;
        Ok(out.messages.unwrap_or_default())
    }

    /// Deletes a message (batched with others within 100 ms).
    pub fn delete(&self, receipt_handle: String) {
        let _ = self.deletes.send(receipt_handle);
    }
}

async fn delete_batcher(
    client: aws_sdk_sqs::Client,
    api: AwsApi,
    url: String,
    mut rx: mpsc::UnboundedReceiver<String>,
) {
    while let Some(first) = rx.recv().await {
        let mut handles = vec![first];
        let window = tokio::time::sleep(DELETE_WINDOW);
        tokio::pin!(window);
        while handles.len() < 10 {
            tokio::select! {
                _ = &mut window => break,
                next = rx.recv() => match next {
                    Some(h) => handles.push(h),
                    None => break,
                },
            }
        }
        let entries: Vec<DeleteMessageBatchRequestEntry> = handles
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(h)
                    .build()
                    .ok()
            })
            .collect();
        let result = api
            .call("DeleteMessageBatch", || {
                client
                    .delete_message_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries.clone()))
                    .send()
            })
            .await;
        match result {
            Ok(out) if !out.failed().is_empty() => {
                tracing::warn!(
                    failed = out.failed().len(),
                    "some SQS messages were not deleted; they will be handled again"
                )
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, count = handles.len(), "deleting SQS messages failed; they will be handled again")
            }
        }
    }
}

/// The Auto Scaling calls of lifecycle hooks.
#[derive(Clone)]
pub struct Lifecycle {
    client: aws_sdk_autoscaling::Client,
    api: AwsApi,
}

impl Lifecycle {
    /// Lifecycle calls through `client`, each guarded by `api` (limits, retries, metrics).
    pub fn new(client: aws_sdk_autoscaling::Client, api: AwsApi) -> Lifecycle {
        Lifecycle { client, api }
    }

    /// `CompleteLifecycleAction` with `CONTINUE`.
    pub async fn complete(&self, a: &LifecycleAction) -> Result<(), CloudError> {
        self.api
            .call("CompleteLifecycleAction", || {
                self.client
                    .complete_lifecycle_action()
                    .auto_scaling_group_name(&a.group)
                    .lifecycle_hook_name(&a.hook)
                    .lifecycle_action_token(&a.token)
                    .instance_id(&a.instance_id)
                    .lifecycle_action_result("CONTINUE")
                    .send()
            })
            .await
            .map(drop)
    }

    /// `RecordLifecycleActionHeartbeat`.
    pub async fn heartbeat(&self, a: &LifecycleAction) -> Result<(), CloudError> {
        self.api
            .call("RecordLifecycleActionHeartbeat", || {
                self.client
                    .record_lifecycle_action_heartbeat()
                    .auto_scaling_group_name(&a.group)
                    .lifecycle_hook_name(&a.hook)
                    .lifecycle_action_token(&a.token)
                    .instance_id(&a.instance_id)
                    .send()
            })
            .await
            .map(drop)
    }

    /// Sends heartbeats every `interval` until `until` has passed or `stop` fires; a rejected
    /// heartbeat (the action is gone) ends them.
    pub async fn heartbeats(
        &self,
        a: LifecycleAction,
        interval: Duration,
        until: Duration,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) {
        let end = tokio::time::Instant::now() + until;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep_until(end) => {
                    tracing::info!(instance = %a.instance_id, "heartbeat deadline reached, stopping heartbeats");
                    return;
                }
                _ = ticker.tick() => {
                    match self.heartbeat(&a).await {
                        Ok(()) => tracing::info!(instance = %a.instance_id, hook = %a.hook, "sent a lifecycle heartbeat"),
                        Err(CloudError::Rejected { message, .. }) => {
                            tracing::warn!(instance = %a.instance_id, error = %message, "heartbeat rejected, stopping heartbeats");
                            return;
                        }
                        Err(e) => tracing::warn!(instance = %a.instance_id, error = %e, "heartbeat failed"),
                    }
                }
            }
        }
    }
}
