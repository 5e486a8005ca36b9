//! The Container Storage Interface (CSI) spec v1.13.0 as Rust: messages, the Identity,
//! Controller, Node (and GroupController, SnapshotMetadata) clients and servers. Generated from
//! `csi.proto` of the Go module `github.com/container-storage-interface/spec` v1.13.0 by
//! `regen.sh` (protox + tonic-prost-build); the generated file is committed so building Stratus
//! needs neither Go nor protoc.

/// The version of the CSI specification these bindings were generated from.
pub const SPEC_VERSION: &str = "1.13.0";

/// Package `csi.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("csi.v1.rs");
}
