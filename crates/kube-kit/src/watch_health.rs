//! Whether a watch-fed cache is current: listed once, and its watch connected since its last
//! failure. Readiness follows it, so a replica whose watch broke (apiserver down, watch refused,
//! resource version expired) reports not ready until the watch resumes or the cache relisted.
//!
//! Failures and relists are seen on the watcher's event stream. A watch that resumes from its
//! last resource version emits nothing until an object changes, so its reconnection is seen one
//! level lower: [`WatchHealth::client`] wraps the client the watch uses and reports every accepted
//! watch request on the watched collection.

use futures::future::BoxFuture;
use kube::runtime::watcher;
use tokio::sync::watch;

/// What is known of a watch-fed cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchState {
    /// The first list completed.
    pub listed: bool,
    /// Why the cache may be stale: the last list or watch failed and has not recovered.
    pub failure: Option<String>,
}

/// What was seen of the watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchSignal {
    /// A (re)list completed: the cache holds a fresh snapshot.
    Listed,
    /// A watch request was accepted or a watch event arrived: the cache follows changes again.
    Connected,
    /// A list or watch failed, or the apiserver sent an error event.
    Failed(String),
}

impl WatchState {
    /// The cache is listed and its watch healthy.
    pub fn is_current(&self) -> bool {
        self.listed && self.failure.is_none()
    }

    /// The state after `signal`.
    pub fn next(&self, signal: WatchSignal) -> WatchState {
        match signal {
            WatchSignal::Listed => WatchState {
                listed: true,
                failure: None,
            },
            WatchSignal::Connected => WatchState {
                listed: self.listed,
                failure: None,
            },
            WatchSignal::Failed(reason) => WatchState {
                listed: self.listed,
                failure: Some(reason),
            },
        }
    }
}

/// What the watcher's stream item says of the watch, if anything.
pub fn signal_of<K>(item: &Result<watcher::Event<K>, watcher::Error>) -> Option<WatchSignal> {
    match item {
        Ok(watcher::Event::InitDone) => Some(WatchSignal::Listed),
        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some(WatchSignal::Connected),
        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
        Err(e) => Some(WatchSignal::Failed(failure_text(e))),
    }
}

/// The error and its causes on one line.
fn failure_text(e: &watcher::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether `request` opens a watch on `collection` (e.g. `/api/v1/nodes`).
pub fn is_watch_of<B>(request: &http::Request<B>, collection: &str) -> bool {
    request.method() == http::Method::GET
        && request.uri().path() == collection
        && request.uri().query().is_some_and(|q| {
            q.split('&')
                .any(|pair| pair == "watch=true" || pair == "watch=1")
        })
}

/// The health of one watch-fed cache; clones share it.
#[derive(Debug, Clone)]
pub struct WatchHealth {
    state: std::sync::Arc<watch::Sender<WatchState>>,
}

impl Default for WatchHealth {
    fn default() -> Self {
        Self {
            state: std::sync::Arc::new(watch::Sender::new(WatchState::default())),
        }
    }
}

impl WatchHealth {
    /// Records what was seen; logs when the cache goes stale or becomes current again.
    pub fn signal(&self, signal: WatchSignal) {
        self.state.send_if_modified(|state| {
            let next = state.next(signal);
            if next == *state {
                return false;
            }
            match (&state.failure, &next.failure) {
                (None, Some(reason)) => tracing::warn!(reason, "watch failed; cache may be stale"),
                (Some(_), None) if next.listed => tracing::info!("watch recovered"),
                _ => {}
            }
            *state = next;
            true
        });
    }

    /// Records what a watcher stream item says.
    pub fn observe<K>(&self, item: &Result<watcher::Event<K>, watcher::Error>) {
        if let Some(signal) = signal_of(item) {
            self.signal(signal);
        }
    }

    /// Records a watch failure reported outside a watcher stream (e.g. by a kube `Controller`).
    pub fn failed(&self, e: &watcher::Error) {
        self.signal(WatchSignal::Failed(failure_text(e)));
    }

    /// Follows the state (for readiness).
    pub fn subscribe(&self) -> watch::Receiver<WatchState> {
        self.state.subscribe()
    }

    /// `client`, reporting each accepted watch request on `collection` as [`WatchSignal::Connected`].
    pub fn client(&self, client: kube::Client, collection: &'static str) -> kube::Client {
        let namespace = client.default_namespace().to_string();
        let health = self.clone();
        let service = tower::service_fn(
            move |request: http::Request<kube::client::Body>| -> BoxFuture<'static, _> {
                let client = client.clone();
                let health = health.clone();
                Box::pin(async move {
                    let watching = is_watch_of(&request, collection);
                    let response = client.send(request).await;
                    if watching && response.as_ref().is_ok_and(|r| r.status().is_success()) {
                        health.signal(WatchSignal::Connected);
                    }
                    response
                })
            },
        );
        kube::Client::new(service, namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    fn request(method: http::Method, uri: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap()
    }

    #[test]
    fn only_watches_of_the_collection_count() {
        let nodes = "/api/v1/nodes";
        let watch = "/api/v1/nodes?&watch=true&timeoutSeconds=290&resourceVersion=12";
        assert!(is_watch_of(&request(http::Method::GET, watch), nodes));
        assert!(is_watch_of(
            &request(http::Method::GET, "/api/v1/nodes?watch=1"),
            nodes
        ));
        for (method, uri) in [
            (http::Method::GET, "/api/v1/nodes?limit=500"),
            (http::Method::GET, "/api/v1/nodes/n1?watch=true"),
            (http::Method::GET, "/api/v1/services?watch=true"),
            (http::Method::GET, "/api/v1/nodes?watch=false"),
            (http::Method::GET, "/api/v1/nodes?nowatch=true"),
            (http::Method::PATCH, watch),
        ] {
            assert!(!is_watch_of(&request(method, uri), nodes), "{uri}");
        }
    }

    #[test]
    fn a_failure_holds_until_a_relist_or_a_reconnection() {
        let fresh = WatchState::default();
        assert!(!fresh.is_current());
        // Connecting before the first list does not make the cache current.
        assert!(!fresh.next(WatchSignal::Connected).is_current());
        let listed = fresh.next(WatchSignal::Listed);
        assert!(listed.is_current());
        let broken = listed.next(WatchSignal::Failed("connection refused".into()));
        assert!(!broken.is_current());
        assert_eq!(broken.failure.as_deref(), Some("connection refused"));
        let again = broken.next(WatchSignal::Failed("still refused".into()));
        assert_eq!(again.failure.as_deref(), Some("still refused"));
        assert!(again.next(WatchSignal::Connected).is_current());
        assert!(again.next(WatchSignal::Listed).is_current());
    }

    #[test]
    fn stream_items_map_to_signals() {
        let done: Result<watcher::Event<Node>, watcher::Error> = Ok(watcher::Event::InitDone);
        assert_eq!(signal_of(&done), Some(WatchSignal::Listed));
        let applied: Result<watcher::Event<Node>, watcher::Error> =
            Ok(watcher::Event::Apply(Node::default()));
        assert_eq!(signal_of(&applied), Some(WatchSignal::Connected));
        let init: Result<watcher::Event<Node>, watcher::Error> = Ok(watcher::Event::Init);
        assert_eq!(signal_of(&init), None);
        let failed: Result<watcher::Event<Node>, watcher::Error> =
            Err(watcher::Error::NoResourceVersion);
        assert!(matches!(signal_of(&failed), Some(WatchSignal::Failed(_))));
    }

    #[tokio::test]
    async fn subscribers_see_changes_only() {
        let health = WatchHealth::default();
        let mut rx = health.subscribe();
        health.signal(WatchSignal::Listed);
        assert!(rx.has_changed().unwrap());
        assert!(rx.borrow_and_update().is_current());
        health.signal(WatchSignal::Connected);
        assert!(!rx.has_changed().unwrap(), "no change, no wake-up");
        health.signal(WatchSignal::Failed("gone".into()));
        assert!(rx.has_changed().unwrap());
        assert!(!rx.borrow_and_update().is_current());
    }
}
