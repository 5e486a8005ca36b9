//! capdvp's test bed (`stratus_scenarios::capdvp_bed`, shared with `stratus-bench-capdvp`) with
//! this build's capdvp binary, and what the runtime-extension tests share: a test CA with a
//! 127.0.0.1 serving certificate in a cert dir, a free loopback port, an ExtensionConfig.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

use std::path::{Path, PathBuf};

use base64::Engine;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::json;

pub use stratus_scenarios::capdvp_bed::*;
pub use stratus_scenarios::wait_for as wait;

/// The capdvp binary the tests run: `CAPDVP_BINARY` when set, else this build's own.
pub fn capdvp_binary() -> std::path::PathBuf {
    std::env::var_os("CAPDVP_BINARY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_capdvp-controller-manager").into())
}

/// The handler names capdvp's discovery lists (Deckhouse's).
pub const HANDLERS: [&str; 3] = [
    "dvp-can-update-machineset",
    "dvp-can-update-machine",
    "dvp-update-machine",
];

/// A test CA and a serving certificate for 127.0.0.1 signed by it, as `tls.crt`/`tls.key` in
/// `dir` (the cert dir layout Deckhouse mounts).
pub struct TestCa {
    /// The CA certificate (PEM): an ExtensionConfig's caBundle.
    pub ca_pem: String,
    /// The cert dir.
    pub dir: PathBuf,
}

impl TestCa {
    /// Writes the pair into `dir` (created).
    pub fn write(dir: &Path) -> anyhow::Result<TestCa> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate()?;
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
            .signed_by(&key, &issuer)?;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("tls.crt"), leaf.pem())?;
        std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
        Ok(TestCa {
            ca_pem: ca.pem(),
            dir: dir.to_path_buf(),
        })
    }
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Cluster API's ExtensionConfig kind.
pub fn extension_configs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("runtime.cluster.x-k8s.io", "v1beta2", "ExtensionConfig"),
        "extensionconfigs",
    )
}

/// Creates the ExtensionConfig `name` pointing at `https://127.0.0.1:<port>` with `ca_pem`.
pub async fn create_extension_config(
    mgmt: &kube::Client,
    name: &str,
    port: u16,
    ca_pem: &str,
) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1beta2",
        "kind": "ExtensionConfig",
        "metadata": {"name": name},
        "spec": {"clientConfig": {
            "url": format!("https://127.0.0.1:{port}"),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        }},
    }))?;
    Api::<DynamicObject>::all_with(mgmt.clone(), &extension_configs())
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

/// The handler names in the ExtensionConfig's status once its `Discovered` condition is true.
pub async fn discovered_handlers(
    mgmt: &kube::Client,
    name: &str,
    within: std::time::Duration,
) -> anyhow::Result<Vec<String>> {
    let api = Api::<DynamicObject>::all_with(mgmt.clone(), &extension_configs());
    wait("the ExtensionConfig's Discovered condition", within, || {
        let api = api.clone();
        async move {
            let ec = api.get(name).await?;
            let discovered = ec.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Discovered" && c["status"] == "True");
            let handlers: Vec<String> = ec.data["status"]["handlers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["name"].as_str().map(String::from))
                .collect();
            Ok((discovered && !handlers.is_empty()).then_some(handlers))
        }
    })
    .await
}
