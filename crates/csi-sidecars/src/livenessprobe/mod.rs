//! livenessprobe: answers `/healthz` for the CSI driver's container by asking the driver
//! Identity.Probe over its socket, on each request, within `--probe-timeout`.
//!
//! - [`flags`]: the upstream flags and their validation into a [`flags::Config`].
//! - [`health`]: the `/healthz` verdict (pure) and the handler that probes the driver.
//! - [`metrics`]: `csi_sidecar_operations_seconds` on `--metrics-path`, as csi-lib-utils names it.
//! - [`app`]: the process.

pub mod app;
pub mod flags;
pub mod health;
pub mod metrics;
