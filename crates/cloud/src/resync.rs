//! Re-sync requests: a provider that watches its cloud asks the service controller to sync a
//! Service again (e.g. the moment a parent load balancer publishes its address), instead of
//! waiting for the next periodic pass.

use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::sync::broadcast;

/// Requests kept for a subscriber that has not read them yet; older ones are dropped (the
/// controller's periodic full sync repairs what a dropped request would have).
const BACKLOG: usize = 4096;

/// A Service, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceKey {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

/// Where a provider publishes re-sync requests. Every subscriber (each running service
/// controller) receives every request sent after it subscribed.
#[derive(Debug, Clone)]
pub struct ResyncRequests {
    sender: broadcast::Sender<ServiceKey>,
}

impl Default for ResyncRequests {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

impl ResyncRequests {
    /// Asks every subscriber to sync `key` again; nothing happens without subscribers.
    pub fn request(&self, key: ServiceKey) {
        let _ = self.sender.send(key);
    }

    /// A stream of the requests sent from now on.
    pub fn subscribe(&self) -> BoxStream<'static, ServiceKey> {
        futures::stream::unfold(self.sender.subscribe(), |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(key) => return Some((key, rx)),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(dropped = n, "service re-sync requests dropped");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_subscriber_gets_requests_sent_after_it_subscribed() {
        let requests = ResyncRequests::default();
        requests.request(ServiceKey {
            namespace: "a".into(),
            name: "early".into(),
        });
        let mut one = requests.subscribe();
        let mut two = requests.subscribe();
        let key = ServiceKey {
            namespace: "a".into(),
            name: "web".into(),
        };
        requests.request(key.clone());
        assert_eq!(one.next().await, Some(key.clone()));
        assert_eq!(two.next().await, Some(key));
        drop(requests);
        assert_eq!(one.next().await, None);
    }
}
