//! Process plumbing shared by Stratus binaries: logging, Go-style durations, shutdown signals.
//!
//! Watches and writes nothing in Kubernetes.

pub mod backoff;
pub mod build_info;
pub mod duration;
pub mod logging;
pub mod memory;
pub mod shutdown;
