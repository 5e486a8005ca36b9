//! OpenStack: whether Cinder extends volumes while attached — its newest block-storage
//! microversion is at least 3.42 — which becomes `allowVolumeExpansion` of every class. Deckhouse's
//! module probes this once against Cinder and keeps the answer; so does the driver (unless the
//! settings say `supportsOnlineDiskResize`). The version document is read apart from the one
//! authenticated request.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::Value;
use stratus_cloud_kit::ApiMetrics;
use stratus_openstack_api::client::http::HttpClient;
use stratus_openstack_api::client::{guard, Service, Session};
use stratus_openstack_api::config::{Credentials, Interface, Named, Secret, TlsOptions};

/// The first Cinder microversion that extends in-use volumes.
pub const ONLINE_EXTEND: (u32, u32) = (3, 42);

/// How long the probe's requests may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Whether a Cinder version document (`{"versions": [...]}` or `{"version": {...}}`) offers
/// online extension: its v3 entry's `version` (the newest microversion) is at least
/// [`ONLINE_EXTEND`]. `None` when the document names no v3 API.
pub fn supports_online_extend(document: &Value) -> Option<bool> {
    let entries: Vec<&Value> = match (document.get("versions"), document.get("version")) {
        (Some(Value::Array(list)), _) => list.iter().collect(),
        (_, Some(one)) => vec![one],
        _ => Vec::new(),
    };
    let v3 = entries
        .into_iter()
        .find(|e| e["id"].as_str().is_some_and(|id| id.starts_with("v3")))?;
    // A v3 API without microversions (an empty `version`) cannot extend attached volumes.
    Some(
        microversion(v3["version"].as_str().unwrap_or_default())
            .is_some_and(|v| v >= ONLINE_EXTEND),
    )
}

/// `3.42` → `(3, 42)`.
fn microversion(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Where the version document of a block-storage endpoint is: the endpoint up to its `/v3`
/// segment (`https://cinder:8776/v3/PROJECT` → `https://cinder:8776/`).
fn versions_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    let base = match trimmed.find("/v3") {
        Some(at) if trimmed[at + 3..].is_empty() || trimmed[at + 3..].starts_with('/') => {
            &trimmed[..at]
        }
        _ => trimmed,
    };
    format!("{base}/")
}

/// Authenticates with the registration's `connection` (authURL, username, password,
/// domainName, tenantName or tenantID, region, caCert) and reads Cinder's version document. The
/// error names what failed, never a credential.
pub async fn probe(connection: &Value) -> Result<bool, String> {
    let text = |key: &str| {
        connection[key]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let need = |key: &str| text(key).ok_or_else(|| format!("connection.{key} is required"));
    let project = match (text("tenantID"), text("tenantName")) {
        (Some(id), _) => Named::Id(id),
        (None, Some(name)) => Named::Name(name),
        (None, None) => return Err("connection.tenantName or tenantID is required".into()),
    };
    let domain = need("domainName")?;
    let credentials = Credentials::Password {
        user: Named::Name(need("username")?),
        user_domain: Some(Named::Name(domain.clone())),
        password: Secret::new(need("password")?),
        project,
        project_domain: Some(Named::Name(domain)),
    };
    let tls = TlsOptions {
        ca_pem: text("caCert"),
        ..TlsOptions::default()
    };
    let http = HttpClient::new(&tls, TIMEOUT).map_err(|e| e.named("connection.caCert: "))?;
    let metrics = Arc::new(ApiMetrics::default());
    let session = Session::new(
        http,
        &need("authURL")?,
        credentials,
        Interface::Public,
        text("region"),
        guard("identity", &metrics),
    );
    let auth = session
        .auth()
        .await
        .map_err(|e| format!("authenticating to Keystone: {e}"))?;
    let endpoint = session
        .endpoint(&auth, Service::BlockStorage)
        .map_err(|e| format!("the catalog's block-storage endpoint: {e}"))?;
    let url = versions_url(&endpoint);
    let answer = session
        .http()
        .send(Method::GET, &url, &[], None)
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    // Cinder answers its version list with 300 Multiple Choices.
    if !(answer.status.is_success() || answer.status.as_u16() == 300) {
        return Err(format!("GET {url}: {}", answer.status));
    }
    let document: Value = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("GET {url}: not JSON: {}", stratus_runtime::redact::json(&e)))?;
    supports_online_extend(&document)
        .ok_or_else(|| format!("GET {url}: no v3 block-storage API in the version document"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_v3_microversion_decides() {
        let doc = |v: &str| json!({"versions": [{"id": "v2.0", "version": ""}, {"id": "v3.0", "version": v}]});
        assert_eq!(supports_online_extend(&doc("3.70")), Some(true));
        assert_eq!(supports_online_extend(&doc("3.42")), Some(true));
        assert_eq!(supports_online_extend(&doc("3.41")), Some(false));
        assert_eq!(supports_online_extend(&doc("")), Some(false));
        assert_eq!(
            supports_online_extend(&json!({"version": {"id": "v3.0", "version": "3.59"}})),
            Some(true)
        );
        assert_eq!(
            supports_online_extend(&json!({"versions": [{"id": "v2.0"}]})),
            None
        );
        assert_eq!(supports_online_extend(&json!({})), None);
    }

    #[test]
    fn version_document_at_the_endpoint_root() {
        assert_eq!(
            versions_url("https://cinder:8776/v3/0f1e2d"),
            "https://cinder:8776/"
        );
        assert_eq!(
            versions_url("http://127.0.0.1:5000/volume/v3/p"),
            "http://127.0.0.1:5000/volume/"
        );
        assert_eq!(versions_url("http://h/volume/v3"), "http://h/volume/");
        assert_eq!(versions_url("http://h/v3x/p"), "http://h/v3x/p/");
    }
}
