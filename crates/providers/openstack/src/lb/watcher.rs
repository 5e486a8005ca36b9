//! Watches load balancers that are PENDING_* for the Services waiting on them: one listing of
//! the project's load balancers per tick (only while something is pending), and a re-sync
//! request for a Service the moment its load balancer leaves PENDING_* (or vanishes), so its
//! ingress is written within a tick of ACTIVE without any worker waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stratus_cloud::{ResyncRequests, ServiceKey};
use tokio::sync::Notify;

use super::octavia::Octavia;

/// The pending load balancers and who waits on them.
#[derive(Debug)]
pub struct Watcher {
    octavia: Octavia,
    resync: ResyncRequests,
    pending: Mutex<HashMap<String, ServiceKey>>,
    wake: Notify,
    interval: Duration,
}

/// Whether a provisioning status is still moving.
pub fn is_pending(status: &str) -> bool {
    status.starts_with("PENDING_")
}

impl Watcher {
    /// A watcher polling every `interval` while something is pending; starts its task.
    pub fn start(octavia: Octavia, resync: ResyncRequests, interval: Duration) -> Arc<Watcher> {
        let watcher = Arc::new(Watcher {
            octavia,
            resync,
            pending: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            interval,
        });
        let weak = Arc::downgrade(&watcher);
        tokio::spawn(async move {
            loop {
                let Some(w) = weak.upgrade() else { return };
                if w.is_idle() {
                    // Wake up now and then to notice the provider was dropped.
                    let _ = tokio::time::timeout(Duration::from_secs(5), w.wake.notified()).await;
                    continue;
                }
                let interval = w.interval;
                w.poll().await;
                drop(w);
                tokio::time::sleep(interval).await;
            }
        });
        watcher
    }

    fn is_idle(&self) -> bool {
        self.pending.lock().expect("pending lock").is_empty()
    }

    /// Waits for load balancer `lb` on behalf of `service`.
    pub fn watch(&self, lb: &str, service: ServiceKey) {
        self.pending
            .lock()
            .expect("pending lock")
            .insert(lb.to_owned(), service);
        self.wake.notify_one();
    }

    async fn poll(&self) {
        let list = match self.octavia.list().await {
            Ok(list) => list,
            Err(e) => {
                tracing::debug!(error = %e, "listing load balancers for pending ones failed");
                return;
            }
        };
        let statuses: HashMap<&str, &str> = list
            .iter()
            .filter_map(|l| Some((l["id"].as_str()?, l["provisioning_status"].as_str()?)))
            .collect();
        let mut done = Vec::new();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            pending.retain(|lb, key| match statuses.get(lb.as_str()) {
                Some(s) if is_pending(s) => true,
                _ => {
                    done.push(key.clone());
                    false
                }
            });
        }
        for key in done {
            tracing::debug!(service = %format!("{}/{}", key.namespace, key.name), "load balancer settled; syncing again");
            self.resync.request(key);
        }
    }
}
