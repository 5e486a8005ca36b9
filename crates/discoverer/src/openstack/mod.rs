//! The OpenStack backend, as Deckhouse's: flavors (instance types and discovery data), Glance
//! images, Neutron networks and security groups (none when Neutron has no security-group API),
//! Nova zones and server groups, Cinder volume types with the default marked; orphaned disks are
//! the Cinder volumes carrying this cluster's `cinder.csi.openstack.org/cluster` metadata. One
//! Keystone session (its token is reused while valid); each list is asked once per run — the
//! flavors, which two steps need, are remembered for the run.

pub mod data;
pub mod env;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use stratus_cloud::CloudError;
use stratus_cloud_kit::ApiMetrics;
use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::http::HttpClient;
use stratus_openstack_api::client::{guard, Clients, Service, ServiceClient, Session};
use stratus_openstack_api::config::TlsOptions;

use crate::discoverer::{Discoverer, DiscoveryError};
use crate::types::{CloudCondition, DiskMeta, InstanceType};
use data::{Flavor, Image, Inventory, Named, Volume, VolumeType, Zone};
use env::OpenStackSettings;

/// The metadata key the Cinder CSI driver marks this cluster's volumes with.
pub const CLUSTER_METADATA: &str = "cinder.csi.openstack.org/cluster";

/// How long one OpenStack request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Asks Nova, Neutron, Glance and Cinder.
pub struct OpenStackDiscoverer {
    compute: ServiceClient,
    network: ServiceClient,
    image: ServiceClient,
    volume: ServiceClient,
    cluster_uuid: Option<String>,
    module_config: Option<Value>,
    run_flavors: Mutex<Option<Arc<Vec<Flavor>>>>,
}

#[derive(Deserialize)]
struct ZonesAnswer {
    #[serde(rename = "availabilityZoneInfo", default)]
    zones: Vec<Zone>,
}

#[derive(Deserialize)]
struct DefaultTypeAnswer {
    volume_type: VolumeType,
}

impl OpenStackDiscoverer {
    /// A backend for `settings`, reporting calls into `metrics`; no request is made yet.
    pub fn new(settings: OpenStackSettings, metrics: &Arc<ApiMetrics>) -> Result<Self, String> {
        let tls = TlsOptions {
            ca_file: settings.ca_file.clone(),
            ca_pem: None,
            client_cert: None,
            insecure: false,
        };
        let http = HttpClient::new(&tls, REQUEST_TIMEOUT).map_err(|e| e.named("OS_CACERT: "))?;
        let session = Arc::new(Session::new(
            http,
            &settings.auth_url,
            settings.credentials,
            settings.interface,
            Some(settings.region),
            guard("identity", metrics),
        ));
        let clients = Clients::new(session.clone(), metrics);
        let plain = |service: Service| {
            ServiceClient::new(
                session.clone(),
                service,
                guard(service.label(), metrics),
                Vec::new(),
            )
        };
        if settings.cluster_uuid.is_none() {
            tracing::warn!("CLUSTER_UUID is not set: orphaned Cinder volumes are not looked for");
        }
        Ok(OpenStackDiscoverer {
            image: plain(Service::Image),
            volume: plain(Service::BlockStorage),
            compute: clients.compute,
            network: clients.network,
            cluster_uuid: settings.cluster_uuid,
            module_config: settings.module_config,
            run_flavors: Mutex::new(None),
        })
    }

    /// This run's flavors: listed at the first need, then remembered until the next run.
    async fn flavors(&self) -> Result<Arc<Vec<Flavor>>, DiscoveryError> {
        if let Some(f) = self.memo().clone() {
            return Ok(f);
        }
        const OP: &str = "ListFlavors";
        let flavors: Vec<Flavor> = self
            .compute
            .list(OP, "/flavors/detail", "flavors")
            .await
            .map_err(|e| DiscoveryError::from_cloud(OP, e))?;
        let flavors = Arc::new(flavors);
        *self.memo() = Some(flavors.clone());
        Ok(flavors)
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Option<Arc<Vec<Flavor>>>> {
        self.run_flavors.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn inventory(&self) -> Result<Inventory, DiscoveryError> {
        let flavors = self.flavors().await?;
        // Glance pages by 25 unless asked for more (1000 is its usual maximum).
        let images: Vec<Image> =
            list(&self.image, "ListImages", "/v2/images?limit=1000", "images").await?;
        let networks: Vec<Named> = list(
            &self.network,
            "ListNetworks",
            "/v2.0/networks?fields=name",
            "networks",
        )
        .await?;
        // Neutron without the security-group extension answers 404: no groups to offer.
        const SG: &str = "ListSecurityGroups";
        let security_groups = match self
            .network
            .list::<Named>(SG, "/v2.0/security-groups?fields=name", "security_groups")
            .await
        {
            Err(e) if is_not_found(&e) => Vec::new(),
            other => other.map_err(|e| DiscoveryError::from_cloud(SG, e))?,
        };
        const AZ: &str = "ListAvailabilityZones";
        let zones = self
            .compute
            .get::<ZonesAnswer>(AZ, "/os-availability-zone")
            .await
            .map_err(|e| DiscoveryError::from_cloud(AZ, e))?
            .zones;
        let volume_types: Vec<VolumeType> =
            list(&self.volume, "ListVolumeTypes", "/types", "volume_types").await?;
        const DEFAULT: &str = "GetDefaultVolumeType";
        let default_volume_type = match self
            .volume
            .get::<DefaultTypeAnswer>(DEFAULT, "/types/default")
            .await
        {
            Ok(answer) => Some(answer.volume_type.id),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(DiscoveryError::from_cloud(DEFAULT, e)),
        };
        let server_groups: Vec<Named> = list(
            &self.compute,
            "ListServerGroups",
            "/os-server-groups",
            "server_groups",
        )
        .await?;
        Ok(Inventory {
            flavors: flavors.as_ref().clone(),
            images,
            networks,
            security_groups,
            zones,
            volume_types,
            default_volume_type,
            server_groups,
        })
    }
}

async fn list<T: serde::de::DeserializeOwned>(
    client: &ServiceClient,
    operation: &'static str,
    path: &str,
    collection: &str,
) -> Result<Vec<T>, DiscoveryError> {
    client
        .list(operation, path, collection)
        .await
        .map_err(|e: CloudError| DiscoveryError::from_cloud(operation, e))
}

/// Cinder's `metadata` filter naming this cluster, URL-encoded.
pub fn cluster_volumes_path(cluster_uuid: &str) -> String {
    let filter = serde_json::json!({ CLUSTER_METADATA: cluster_uuid }).to_string();
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("metadata", &filter)
        .finish();
    format!("/volumes/detail?{query}")
}

#[async_trait]
impl Discoverer for OpenStackDiscoverer {
    fn cloud(&self) -> &'static str {
        "openstack"
    }

    fn begin_run(&self) {
        *self.memo() = None;
    }

    async fn instance_types(&self) -> Result<Option<Vec<InstanceType>>, DiscoveryError> {
        let flavors = self.flavors().await?;
        Ok(Some(flavors.iter().map(data::instance_type).collect()))
    }

    async fn discovery_data(&self, stored: &[u8]) -> Result<Option<Vec<u8>>, DiscoveryError> {
        let base = data::base_document(stored, self.module_config.as_ref())?;
        let inventory = self.inventory().await?;
        data::document(base, &inventory).map(Some)
    }

    async fn disks_meta(&self) -> Result<Vec<DiskMeta>, DiscoveryError> {
        let Some(cluster) = &self.cluster_uuid else {
            return Ok(Vec::new());
        };
        let volumes: Vec<Volume> = list(
            &self.volume,
            "ListVolumes",
            &cluster_volumes_path(cluster),
            "volumes",
        )
        .await?;
        Ok(volumes
            .into_iter()
            .map(|v| DiskMeta {
                name: v.name.unwrap_or_default(),
                id: v.id,
            })
            .collect())
    }

    async fn check_cloud_conditions(&self) -> Result<Vec<CloudCondition>, DiscoveryError> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volume_filter_is_cinders_metadata_dict_encoded() {
        assert_eq!(
            cluster_volumes_path("c-1"),
            "/volumes/detail?metadata=%7B%22cinder.csi.openstack.org%2Fcluster%22%3A%22c-1%22%7D"
        );
    }
}
