//! Kubernetes plumbing shared by every Stratus binary: the client flags and the one client
//! builder, Event publishing, watch health (for readiness) and the wait for a cache's first list.
//!
//! Writes only Events (events.k8s.io) for the controllers that publish them.

pub mod api_limits;
pub mod client;
pub mod deckhouse;
pub mod events;
pub mod proxy;
pub mod store;
pub mod watch_health;

pub use api_limits::KubeApiArgs;
pub use client::{ClientError, KubeClientArgs};
pub use events::EventPublisher;
pub use store::wait_for_store;
pub use watch_health::{WatchHealth, WatchSignal, WatchState};
