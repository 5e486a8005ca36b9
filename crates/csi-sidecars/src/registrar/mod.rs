//! node-driver-registrar: asks the CSI driver its name, then serves the kubelet's
//! plugin-registration service on `<plugin-registration-path>/<driver>-reg.sock` so the kubelet
//! learns the driver and the socket it answers on.
//!
//! - [`flags`]: the upstream flags and their validation into a [`flags::Config`].
//! - [`service`]: the `pluginregistration.Registration` service and what the kubelet reported.
//! - [`health`]: the `/healthz` verdict (pure) and its handler.
//! - [`socket`]: the registration socket and the registration probe file on disk.
//! - [`app`]: the process, start to stop.

pub mod app;
pub mod authority;
pub mod flags;
pub mod health;
pub mod service;
pub mod socket;
