//! Waiting for a reflector store's first listing.

use std::time::Duration;

use kube::runtime::reflector::Store;
use kube::Resource;

/// Waits until `store` has completed its first listing; `false` if its writer is gone.
///
/// kube-rs wakes only one waiter per store when it becomes ready, so the wait is re-polled
/// every `period` instead of trusted once.
pub async fn wait_for_store<K>(store: &Store<K>, period: Duration) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(period, store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_) => tracing::debug!("cache not ready yet"),
        }
    }
}
