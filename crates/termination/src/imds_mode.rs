//! IMDS mode (one handler per node): polls the node's instance metadata every
//! `--imds-poll-interval` for the enabled monitors at once, and acts in the same tick a notice
//! becomes due (upstream: a 2 s poll, then a separate 1 s event loop). Monitor errors are
//! counted, reported and retried on the next tick; they never stop the process.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::{Mutex, Semaphore};

use crate::events;
use crate::handler::Handler;
use crate::imds::Imds;
use crate::imds_events;
use crate::interruption::InterruptionEvent;
use crate::reboot;
use crate::store::EventStore;

/// What one poll found.
#[derive(Debug, Default)]
struct Poll {
    events: Vec<InterruptionEvent>,
    cancelled: Vec<InterruptionEvent>,
    errors: Vec<(&'static str, String)>,
}

/// The IMDS-mode loop.
pub struct ImdsMode {
    pub(crate) handler: Handler,
    pub(crate) imds: Arc<Imds>,
}

impl ImdsMode {
    /// Runs until `shutdown` completes (then waits for handlings in progress).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let opts = self.handler.opts.clone();
        let node = opts.node_name.clone();
        let annotations = BTreeMap::new();
        let store = Arc::new(Mutex::new(EventStore::new()));
        if opts.enable_scheduled_event_draining {
            self.uncordon_after_reboot(&store).await;
        }
        let workers = Arc::new(Semaphore::new(opts.workers.max(1) as usize));
        let mut seen_at: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
        let mut last_errors: BTreeMap<&'static str, String> = BTreeMap::new();
        let mut ticker = tokio::time::interval(opts.imds_poll_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        tracing::info!(node = %node, interval = ?opts.imds_poll_interval, "monitoring instance metadata");
        let mut polls: u32 = 0;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = ticker.tick() => {}
            }
            let poll = self.poll().await;
            polls += 1;
            if polls == 3 {
                // Start-up is over: hand back the code pages only it used.
                let bytes = crate::footprint::page_out_executable();
                tracing::debug!(bytes, "paged out start-up code");
            }
            for (monitor, error) in &poll.errors {
                self.handler.metrics.error(monitor);
                if last_errors.get(monitor) != Some(error) {
                    tracing::warn!(monitor, error = %error, "problem monitoring for events");
                    self.handler
                        .recorder
                        .node_event(
                            &node,
                            true,
                            events::MONITOR_ERROR,
                            format!(
                                "There was a problem monitoring for events in monitor '{monitor}'"
                            ),
                            &annotations,
                        )
                        .await;
                    last_errors.insert(monitor, error.clone());
                }
            }
            last_errors.retain(|m, _| poll.errors.iter().any(|(e, _)| e == m));
            let mut uncordon = false;
            {
                let mut store = store.lock().await;
                for event in poll.events {
                    let id = event.event_id.clone();
                    if store.add(event) {
                        seen_at.entry(id).or_insert_with(tokio::time::Instant::now);
                    }
                }
                for event in &poll.cancelled {
                    store.cancel(&event.event_id);
                    if store.should_uncordon(&node) {
                        uncordon = true;
                    }
                }
            }
            if uncordon {
                tracing::info!(node = %node, "uncordoning the node after a cancellation");
                self.handler.uncordon(&node, &annotations).await;
            }
            let due = store
                .lock()
                .await
                .take_due(Timestamp::now(), opts.node_grace());
            for mut event in due {
                let seen = seen_at
                    .get(&event.event_id)
                    .copied()
                    .unwrap_or_else(tokio::time::Instant::now);
                let handler = self.handler.clone();
                let store = store.clone();
                let permit = workers.clone().acquire_owned().await;
                tokio::spawn(async move {
                    let _permit = permit;
                    handler
                        .recorder
                        .node_event(
                            &event.node_name,
                            false,
                            event.reason(handler.opts.log_format_version),
                            event.description.clone(),
                            &BTreeMap::new(),
                        )
                        .await;
                    tracing::info!(event_id = %event.event_id, kind = event.kind.as_str(), "requesting instance drain");
                    let result = handler.handle(&mut event, &BTreeMap::new(), seen).await;
                    if let Err(e) = &result {
                        tracing::error!(event_id = %event.event_id, error = %e, "handling the interruption failed; retrying on the next poll");
                    }
                    store.lock().await.finish(&event, result.is_ok());
                });
            }
        }
        // Let handlings in progress finish.
        let _ = workers.acquire_many(opts.workers.max(1) as u32).await;
        tracing::info!("IMDS monitoring stopped");
    }

    async fn poll(&self) -> Poll {
        let opts = &self.handler.opts;
        let node = opts.node_name.as_str();
        let imds = &self.imds;
        let spot = async {
            if !opts.enable_spot_interruption_draining {
                return Ok(None);
            }
            match imds.spot_action().await.map_err(|e| e.to_string())? {
                None => Ok(None),
                Some(a) => imds_events::spot_itn(&a, node)
                    .map(Some)
                    .map_err(|e| e.to_string()),
            }
        };
        let scheduled = async {
            if !opts.enable_scheduled_event_draining {
                return Ok(Vec::new());
            }
            let details = imds.scheduled_events().await.map_err(|e| e.to_string())?;
            details
                .iter()
                .map(|d| imds_events::scheduled(d, node).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, String>>()
        };
        let rebalance = async {
            if !(opts.enable_rebalance_monitoring || opts.enable_rebalance_draining) {
                return Ok(None);
            }
            match imds
                .rebalance_recommendation()
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(None),
                Some(r) => imds_events::rebalance(&r, node)
                    .map(Some)
                    .map_err(|e| e.to_string()),
            }
        };
        let asg = async {
            if !opts.enable_asg_lifecycle_draining {
                return Ok(None);
            }
            let state = imds
                .asg_target_lifecycle_state()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(imds_events::asg_target_state(
                &state,
                &self.handler.metadata.instance_id,
                node,
                Timestamp::now(),
            ))
        };
        let (spot, scheduled, rebalance, asg) = tokio::join!(spot, scheduled, rebalance, asg);
        let mut poll = Poll::default();
        match spot {
            Ok(e) => poll.events.extend(e),
            Err(e) => poll.errors.push(("SPOT_ITN_MONITOR", e)),
        }
        match scheduled {
            Ok(list) => {
                for e in list {
                    if imds_events::is_cancellation(&e.state) {
                        poll.cancelled.push(e);
                    } else {
                        poll.events.push(e);
                    }
                }
            }
            Err(e) => poll.errors.push(("SCHEDULED_EVENT", e)),
        }
        match rebalance {
            Ok(e) => poll.events.extend(e),
            Err(e) => poll.errors.push(("REBALANCE_RECOMMENDATION_MONITOR", e)),
        }
        match asg {
            Ok(e) => poll.events.extend(e),
            Err(e) => poll.errors.push(("ASG_LIFECYCLE_MONITOR", e)),
        }
        poll
    }

    /// After a scheduled reboot the node comes back cordoned and labelled: uncordon it once
    /// the uptime shows the reboot happened, and ignore that event from now on.
    async fn uncordon_after_reboot(&self, store: &Mutex<EventStore>) {
        let opts = &self.handler.opts;
        let node = &opts.node_name;
        let labels = match self.handler.nodes.get(node).await {
            Ok(Some(n)) => n.metadata.labels.unwrap_or_default(),
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(node = %node, error = %e, "reading the node for the after-reboot check");
                return;
            }
        };
        let uptime = match reboot::read_uptime(&opts.uptime_from_file) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(error = %e, "reading the uptime");
                return;
            }
        };
        match reboot::decide(&labels, Timestamp::now(), uptime) {
            reboot::Decision::Nothing => {}
            reboot::Decision::NotYet => tracing::info!("the scheduled reboot has not happened yet"),
            reboot::Decision::Uncordon { event_id } => {
                tracing::info!(node = %node, event_id = %event_id, "uncordoning after the scheduled reboot");
                self.handler.uncordon(node, &BTreeMap::new()).await;
                store.lock().await.ignore(&event_id);
            }
        }
    }
}
