//! Upstream-compatible CSI sidecars as a library: `node-driver-registrar` ([`registrar`]) and
//! `livenessprobe` ([`livenessprobe`]), with what both share: the driver's socket and its
//! Identity calls ([`identity`]), Go-style listen addresses ([`endpoint`]), the HTTP server of
//! `/healthz` ([`http`]) and gRPC channels over unix sockets ([`unix`]); with the `testing`
//! feature, the helpers of the binaries' integration tests (`testing`). The binaries
//! `csi-node-driver-registrar` and `csi-livenessprobe` only parse flags, set up logging and run
//! [`registrar::app::run`] or [`livenessprobe::app::run`] through [`main_loop::run`].

pub mod endpoint;
pub mod http;
pub mod identity;
pub mod livenessprobe;
pub mod main_loop;
pub mod registrar;
#[cfg(feature = "testing")]
pub mod testing;
pub mod unix;
