//! Process plumbing shared by Stratus binaries: logging, Go-style durations, shutdown signals,
//! error text that never echoes its input (`redact`) and the startup check that names every
//! missing setting at once (`startup`).
//!
//! Watches and writes nothing in Kubernetes.

pub mod any_certificate;
pub mod backoff;
pub mod build_info;
pub mod duration;
pub mod feature_gates;
pub mod logging;
pub mod memory;
pub mod proxy_env;
pub mod redact;
pub mod shutdown;
pub mod startup;
