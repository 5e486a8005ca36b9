//! Waiting for a reflector store's first listing: the one wait every controller uses.

use std::time::Duration;

use kube::runtime::reflector::Store;
use kube::Resource;

/// How often a wait on a store's readiness is re-polled.
pub const STORE_POLL: Duration = Duration::from_millis(200);

/// Waits until `store` has completed its first listing; `false` if its writer is gone.
///
/// kube-rs wakes only one waiter per store when it becomes ready (several controllers wait on
/// the same store), so the wait is re-polled every [`STORE_POLL`] instead of trusted once.
pub async fn wait_for_store<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(STORE_POLL, store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_) => tracing::debug!("cache not ready yet"),
        }
    }
}
