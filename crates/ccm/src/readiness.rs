//! Readiness of the CCM: while the informers of the leading controllers are listed and watching
//! (a broken watch makes the replica unready until it resumes), and once the provider's own gates
//! opened (AWS: the instance cache has synced).

use stratus_cloud::ReadinessGate;
use stratus_kube_kit::{WatchHealth, WatchState};
use stratus_serving::{Readiness, ReadyFlag};

/// Adds readiness condition `name`, met while the informer of `kind` (e.g. "Node") has listed
/// and its watch is healthy: it fails again, with the reason, while the watch is broken.
pub fn track_informer(readiness: &Readiness, name: &str, kind: &'static str, health: WatchHealth) {
    let flag: ReadyFlag = readiness.add(name, &not_listed(kind));
    let mut states = health.subscribe();
    tokio::spawn(async move {
        loop {
            let state = states.borrow_and_update().clone();
            match informer_readiness(kind, &state) {
                None => flag.set(),
                Some(reason) => flag.unset(&reason),
            }
            if states.changed().await.is_err() {
                return;
            }
        }
    });
}

fn not_listed(kind: &str) -> String {
    format!(
        "the {} informer has not listed {kind}s yet",
        kind.to_lowercase()
    )
}

/// Why an informer in `state` makes the replica unready; `None` when it does not.
fn informer_readiness(kind: &str, state: &WatchState) -> Option<String> {
    match &state.failure {
        Some(reason) => Some(format!(
            "the {kind} watch is failing, the cache may be stale: {reason}"
        )),
        None if !state.listed => Some(not_listed(kind)),
        None => None,
    }
}

/// Adds the provider's readiness gates: each condition is met once its gate opens (waiting may
/// start the work, e.g. the first listing of an instance cache).
pub fn track_gates(readiness: &Readiness, gates: Vec<ReadinessGate>) {
    for gate in gates {
        let flag = readiness.add(gate.name, &gate.pending);
        tokio::spawn(async move {
            gate.opened.await;
            flag.set();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_informer_is_ready_while_listed_and_watching() {
        let fresh = WatchState::default();
        assert_eq!(
            informer_readiness("Node", &fresh).as_deref(),
            Some("the node informer has not listed Nodes yet")
        );
        let listed = WatchState {
            listed: true,
            failure: None,
        };
        assert_eq!(informer_readiness("Node", &listed), None);
        let broken = WatchState {
            listed: true,
            failure: Some("connection refused".into()),
        };
        assert_eq!(
            informer_readiness("Service", &broken).as_deref(),
            Some("the Service watch is failing, the cache may be stale: connection refused")
        );
    }
}
