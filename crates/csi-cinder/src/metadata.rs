//! The node's identity from the OpenStack metadata service, as upstream's node plugin reads it
//! when no `--nodeid` is given: `uuid` (the Nova server) and `availability_zone` of
//! `/openstack/latest/meta_data.json`.

use http::Method;
use serde::Deserialize;
use stratus_openstack_api::client::http::HttpClient;

/// Where the metadata service answers.
pub const METADATA_URL: &str = "http://169.254.169.254/openstack/latest/meta_data.json";

/// What the node plugin needs of the metadata.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NodeMetadata {
    /// The server's UUID (the node ID).
    pub uuid: String,
    /// Its availability zone.
    #[serde(default)]
    pub availability_zone: String,
}

/// Reads a `meta_data.json` document.
pub fn parse(body: &[u8]) -> Result<NodeMetadata, String> {
    serde_json::from_slice(body).map_err(|e| {
        format!(
            "meta_data.json does not parse: {}",
            stratus_runtime::redact::json(&e)
        )
    })
}

/// Asks the metadata service at `url`.
pub async fn fetch(http: &HttpClient, url: &str) -> Result<NodeMetadata, String> {
    let response = http
        .send(Method::GET, url, &[], None)
        .await
        .map_err(|e| format!("{url}: {}", e.0))?;
    if !response.status.is_success() {
        return Err(format!("{url}: {}", response.status));
    }
    parse(&response.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_documents_parse() {
        let m = parse(br#"{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa", "availability_zone": "nova", "hostname": "n1", "meta": {}}"#).unwrap();
        assert_eq!(m.uuid, "83679162-1378-4288-a2d4-70e13ec132aa");
        assert_eq!(m.availability_zone, "nova");
        assert!(parse(b"{}").is_err());
    }
}
