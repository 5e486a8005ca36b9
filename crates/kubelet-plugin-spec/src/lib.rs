//! The kubelet's plugin-registration API v1 (`pluginregistration.Registration`: GetInfo,
//! NotifyRegistrationStatus) as Rust: messages, client and server. Generated from
//! `pkg/apis/pluginregistration/v1/api.proto` of the Go module `k8s.io/kubelet` v0.34.4 by
//! `regen.sh` (protox + tonic-prost-build); the generated file is committed so building Stratus
//! needs neither Go nor protoc.

/// The `k8s.io/kubelet` module version these bindings were generated from.
pub const KUBELET_VERSION: &str = "v0.34.4";

/// `PluginInfo.type` of a CSI driver (`CSIPlugin` in `k8s.io/kubelet/.../pluginregistration/v1`).
pub const CSI_PLUGIN: &str = "CSIPlugin";

/// Package `pluginregistration` (the proto's package; its Go package is `.../v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("pluginregistration.rs");
}
