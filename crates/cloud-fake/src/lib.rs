//! An in-memory cloud for testing the generic controllers without a real cloud: instances, load
//! balancers and route tables held in memory, knobs that make calls slow, fail, answer
//! "pending" or report instances gone, and a log of every call. It is also a registrable
//! provider (`--cloud-provider=fake`), so the CCM library can be run on it.
//!
//! Watches and writes nothing outside its own memory.

pub mod cloud;
pub mod instances;
pub mod knobs;
pub mod load_balancers;
pub mod provider;
pub mod routes;

pub use cloud::{running, FakeCloud};
pub use instances::{FakeInstance, InstanceState};
pub use knobs::{Call, Knob};
pub use provider::FakeProvider;
