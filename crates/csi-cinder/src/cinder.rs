//! The one seam over Cinder (volumes, `os-extend`) and Nova (`os-volume_attachments`, server
//! lookups) through the shared OpenStack session: guarded calls (rate limiter, metrics,
//! retries, re-authentication), paging inside, and OpenStack errors mapped to the CSI errors
//! the sidecars handle right.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Method};
use serde::Deserialize;
use serde_json::{json, Value};
use stratus_cloud::CloudError;
use stratus_cloud_kit::ApiMetrics;
use stratus_csi::BackendError;
use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::{guard, Service, ServiceClient, Session};

use crate::params::VolumeSpec;

/// Cinder's microversion: in-use volumes may be extended from 3.42.
pub const CINDER_MICROVERSION: &str = "volume 3.42";
/// Nova's microversion: multi-attach volumes need 2.60.
pub const NOVA_MICROVERSION: &str = "compute 2.60";

/// One attachment as Cinder lists it on a volume.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AttachmentInfo {
    /// The server.
    pub server_id: String,
    /// The guest device Nova chose.
    #[serde(default)]
    pub device: Option<String>,
}

/// A Cinder volume (the fields the driver reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VolumeInfo {
    /// UUID.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Size in GiB.
    pub size: i64,
    /// `creating`, `available`, `attaching`, `in-use`, `detaching`, `extending`, `error`…
    pub status: String,
    /// Availability zone.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// Whether several servers may attach it.
    #[serde(default)]
    pub multiattach: bool,
    /// Metadata.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Attachments (attached or detaching).
    #[serde(default)]
    pub attachments: Vec<AttachmentInfo>,
}

impl VolumeInfo {
    /// The attachment to `server`, if any.
    pub fn attachment(&self, server: &str) -> Option<&AttachmentInfo> {
        self.attachments.iter().find(|a| a.server_id == server)
    }
}

/// Maps a failed OpenStack call to the CSI error the sidecars handle right.
pub fn backend_error(err: CloudError) -> BackendError {
    match &err {
        CloudError::Throttled { .. } | CloudError::Unavailable { .. } => {
            BackendError::Unavailable(err.to_string())
        }
        CloudError::Rejected { code, .. } => match code.as_str() {
            "404" => BackendError::NotFound(err.to_string()),
            // A server busy with another task: retry.
            "409" => BackendError::Pending(err.to_string()),
            // Cinder over quota.
            "413" => BackendError::ResourceExhausted(err.to_string()),
            "400" => BackendError::FailedPrecondition(err.to_string()),
            _ => BackendError::Internal(err.to_string()),
        },
        CloudError::InvalidInput(_) => BackendError::InvalidArgument(err.to_string()),
        _ => BackendError::Internal(err.to_string()),
    }
}

/// A query string value, percent-encoded.
fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Cinder and Nova, as the driver calls them.
#[derive(Debug, Clone)]
pub struct CinderApi {
    volume: ServiceClient,
    compute: ServiceClient,
}

impl CinderApi {
    /// Clients over `session`, reporting into `metrics`.
    pub fn new(session: Arc<Session>, metrics: &Arc<ApiMetrics>) -> CinderApi {
        let header = |v: &'static str| {
            vec![(
                HeaderName::from_static("openstack-api-version"),
                HeaderValue::from_static(v),
            )]
        };
        CinderApi {
            volume: ServiceClient::new(
                session.clone(),
                Service::BlockStorage,
                guard("block-storage", metrics),
                header(CINDER_MICROVERSION),
            ),
            compute: ServiceClient::new(
                session,
                Service::Compute,
                guard("compute", metrics),
                header(NOVA_MICROVERSION),
            ),
        }
    }

    /// The volume, `None` when Cinder does not know it.
    pub async fn volume(&self, id: &str) -> Result<Option<VolumeInfo>, BackendError> {
        #[derive(Deserialize)]
        struct One {
            volume: VolumeInfo,
        }
        match self
            .volume
            .get::<One>("GetVolume", &format!("/volumes/{}", encode(id)))
            .await
        {
            Ok(one) => Ok(Some(one.volume)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(backend_error(e)),
        }
    }

    /// Volumes named `name`.
    pub async fn volumes_named(&self, name: &str) -> Result<Vec<VolumeInfo>, BackendError> {
        let all: Vec<VolumeInfo> = self
            .volume
            .list(
                "ListVolumes",
                &format!("/volumes/detail?name={}", encode(name)),
                "volumes",
            )
            .await
            .map_err(backend_error)?;
        Ok(all
            .into_iter()
            .filter(|v| v.name.as_deref() == Some(name))
            .collect())
    }

    /// Every volume of the project, or those whose metadata has `key=value`.
    pub async fn volumes(
        &self,
        metadata: Option<(&str, &str)>,
    ) -> Result<Vec<VolumeInfo>, BackendError> {
        let path = match metadata {
            Some((k, v)) => format!(
                "/volumes/detail?metadata={}",
                encode(&json!({ k: v }).to_string())
            ),
            None => "/volumes/detail".to_string(),
        };
        self.volume
            .list("ListVolumes", &path, "volumes")
            .await
            .map_err(backend_error)
    }

    /// Creates a volume.
    pub async fn create(&self, spec: &VolumeSpec) -> Result<VolumeInfo, BackendError> {
        #[derive(Deserialize)]
        struct One {
            volume: VolumeInfo,
        }
        let mut volume =
            json!({"name": spec.name, "size": spec.size_gib, "metadata": spec.metadata});
        if let Some(t) = &spec.volume_type {
            volume["volume_type"] = json!(t);
        }
        if let Some(z) = &spec.zone {
            volume["availability_zone"] = json!(z);
        }
        let response = self
            .volume
            .send(
                "CreateVolume",
                Method::POST,
                "/volumes",
                Some(&json!({ "volume": volume })),
            )
            .await
            .map_err(backend_error)?;
        serde_json::from_slice::<One>(&response.body)
            .map(|o| o.volume)
            .map_err(|e| {
                BackendError::Internal(format!(
                    "CreateVolume answer: {}",
                    stratus_runtime::redact::json(&e)
                ))
            })
    }

    /// Deletes a volume; gone already is success.
    pub async fn delete(&self, id: &str) -> Result<(), BackendError> {
        self.ok_if_gone(
            self.volume
                .send(
                    "DeleteVolume",
                    Method::DELETE,
                    &format!("/volumes/{}", encode(id)),
                    None,
                )
                .await,
        )
    }

    /// Asks Cinder to grow a volume to `size_gib`.
    pub async fn extend(&self, id: &str, size_gib: i64) -> Result<(), BackendError> {
        self.volume
            .send(
                "ExtendVolume",
                Method::POST,
                &format!("/volumes/{}/action", encode(id)),
                Some(&json!({"os-extend": {"new_size": size_gib}})),
            )
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Whether the server exists.
    pub async fn server_exists(&self, id: &str) -> Result<bool, BackendError> {
        match self
            .compute
            .get::<Value>("GetServer", &format!("/servers/{}", encode(id)))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(backend_error(e)),
        }
    }

    /// Asks Nova to attach the volume to the server; returns the device Nova chose.
    pub async fn attach(&self, server: &str, volume: &str) -> Result<String, BackendError> {
        let response = self
            .compute
            .send(
                "AttachVolume",
                Method::POST,
                &format!("/servers/{}/os-volume_attachments", encode(server)),
                Some(&json!({"volumeAttachment": {"volumeId": volume}})),
            )
            .await
            .map_err(backend_error)?;
        let body: Value = serde_json::from_slice(&response.body).map_err(|e| {
            BackendError::Internal(format!(
                "AttachVolume answer: {}",
                stratus_runtime::redact::json(&e)
            ))
        })?;
        Ok(body["volumeAttachment"]["device"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Asks Nova to detach the volume from the server; not attached is success.
    pub async fn detach(&self, server: &str, volume: &str) -> Result<(), BackendError> {
        self.ok_if_gone(
            self.compute
                .send(
                    "DetachVolume",
                    Method::DELETE,
                    &format!(
                        "/servers/{}/os-volume_attachments/{}",
                        encode(server),
                        encode(volume)
                    ),
                    None,
                )
                .await,
        )
    }

    fn ok_if_gone<T>(&self, result: Result<T, CloudError>) -> Result<(), BackendError> {
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(backend_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_retryable_codes_and_answers_parse() {
        let rejected = |code: &str| CloudError::Rejected {
            operation: "x".into(),
            code: code.into(),
            message: "m".into(),
        };
        assert!(matches!(
            backend_error(rejected("404")),
            BackendError::NotFound(_)
        ));
        assert!(matches!(
            backend_error(rejected("409")),
            BackendError::Pending(_)
        ));
        assert!(matches!(
            backend_error(rejected("400")),
            BackendError::FailedPrecondition(_)
        ));
        assert!(matches!(
            backend_error(CloudError::Throttled {
                operation: "x".into(),
                message: "429".into()
            }),
            BackendError::Unavailable(_)
        ));
        let v: VolumeInfo = serde_json::from_value(json!({
            "id": "v", "name": null, "size": 1, "status": "in-use", "availability_zone": "nova",
            "multiattach": false, "metadata": {},
            "attachments": [{"server_id": "s", "device": "/dev/vdb", "attachment_id": "a"}]}))
        .unwrap();
        assert_eq!(
            v.attachment("s").unwrap().device.as_deref(),
            Some("/dev/vdb")
        );
        assert_eq!(encode("a b/{}"), "a+b%2F%7B%7D");
    }
}
