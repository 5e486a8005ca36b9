//! The Stratus CSI core: the Identity, Controller and Node services of CSI spec v1.13 served
//! over a unix socket, delegating every cloud decision to a [`ControllerBackend`] and every
//! device question to a [`NodeBackend`]. It owns what every driver shares: request validation
//! and the gRPC error codes, idempotency and per-volume operation locks, the mount/format seam
//! (real `mkfs`, `mount`, `resize2fs` commands), the describe batcher and the shared state
//! poller, per-operation gRPC metrics and the `/metrics` + `/healthz` endpoint. It watches
//! nothing and writes nothing in Kubernetes.

pub mod backend;
pub mod batch;
pub mod controller;
pub mod devices;
pub mod error;
pub mod format;
pub mod http;
pub mod https;
pub mod identity;
pub mod locks;
pub mod metrics;
pub mod mount;
pub mod node;
pub mod paging;
pub mod poller;
pub mod server;
pub mod validate;

pub use backend::{
    ControllerBackend, ControllerCaps, CreateVolumeRequest, NodeBackend, Snapshot, Topology,
    Volume, VolumeSource,
};
pub use error::BackendError;
pub use server::{serve, DriverInfo, Endpoint, Services};
