//! The OpenStack inventory as the API answers it and the discovery document Deckhouse's schema
//! (`OpenStackCloudProviderDiscoveryData`, `deckhouse.io/v1alpha1`) asks for, built by pure
//! functions: instance types from flavors, and the document from the inventory over the stored
//! one (every key the installer wrote is kept; the discovered keys are replaced). Lists are
//! sorted and de-duplicated so an unchanged cloud gives the same bytes (and no write).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::discoverer::DiscoveryError;
use crate::types::InstanceType;

/// A Nova flavor (`flavors/detail`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Flavor {
    /// Name.
    pub name: String,
    /// vCPUs.
    pub vcpus: u64,
    /// RAM in MiB.
    pub ram: u64,
    /// Root disk in GiB (0: the image's size).
    #[serde(default)]
    pub disk: u64,
    /// Ephemeral disk in GiB.
    #[serde(rename = "OS-FLV-EXT-DATA:ephemeral", default)]
    pub ephemeral: u64,
}

/// A Glance image.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Image {
    /// Id.
    pub id: String,
    /// Name (may be null in Glance).
    #[serde(default)]
    pub name: Option<String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: String,
    /// The image property naming the volume type of volumes made from it.
    #[serde(default)]
    pub cinder_img_volume_type: Option<String>,
}

/// Something listed only by name (networks, security groups, server groups).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Named {
    /// Name (may be empty).
    #[serde(default)]
    pub name: Option<String>,
}

/// A Nova availability zone (`os-availability-zone`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Zone {
    /// Name.
    #[serde(rename = "zoneName")]
    pub name: String,
    /// State.
    #[serde(rename = "zoneState")]
    pub state: ZoneState,
}

/// A zone's state.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ZoneState {
    /// Whether servers can be placed there.
    pub available: bool,
}

/// A Cinder volume type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VolumeType {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Extra specs.
    #[serde(default)]
    pub extra_specs: Option<Map<String, Value>>,
    /// Public.
    #[serde(default)]
    pub is_public: Option<bool>,
    /// Public, as the type-access extension names it (older Cinder answers only this).
    #[serde(default, rename = "os-volume-type-access:is_public")]
    pub access_is_public: Option<bool>,
    /// QoS specs.
    #[serde(default)]
    pub qos_specs_id: Option<String>,
}

/// A Cinder volume (orphan candidates).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Volume {
    /// Id.
    pub id: String,
    /// Name (the PersistentVolume's, for CSI volumes).
    #[serde(default)]
    pub name: Option<String>,
}

/// Everything one run lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// Flavors.
    pub flavors: Vec<Flavor>,
    /// Images.
    pub images: Vec<Image>,
    /// Network names.
    pub networks: Vec<Named>,
    /// Security group names (empty when Neutron has no security-group API).
    pub security_groups: Vec<Named>,
    /// Nova zones.
    pub zones: Vec<Zone>,
    /// Volume types.
    pub volume_types: Vec<VolumeType>,
    /// The default volume type's id, if Cinder has one.
    pub default_volume_type: Option<String>,
    /// Server group names.
    pub server_groups: Vec<Named>,
}

/// The catalog entry of a flavor (Deckhouse: cpu = vCPUs, memory in Mi, root disk in Gi — the
/// ephemeral disk when the root disk is 0).
pub fn instance_type(f: &Flavor) -> InstanceType {
    let disk = if f.disk == 0 { f.ephemeral } else { f.disk };
    InstanceType {
        name: f.name.clone(),
        cpu: f.vcpus.to_string(),
        memory: format!("{}Mi", f.ram),
        root_disk: format!("{disk}Gi"),
    }
}

fn names(items: &[Named]) -> Vec<String> {
    items
        .iter()
        .filter_map(|n| n.name.clone())
        .filter(|n| !n.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The base document: the stored discovery data, or `MODULE_CONFIG` when nothing is stored.
pub fn base_document(
    stored: &[u8],
    module_config: Option<&Value>,
) -> Result<Map<String, Value>, DiscoveryError> {
    let stored = std::str::from_utf8(stored).map_err(|e| {
        DiscoveryError::Input(format!("the stored discovery data is not UTF-8: {e}"))
    })?;
    if stored.trim().is_empty() {
        return Ok(module_config
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default());
    }
    match serde_json::from_str::<Value>(stored) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(DiscoveryError::Input(
            "the stored discovery data is not a JSON object".into(),
        )),
        Err(e) => Err(DiscoveryError::Input(format!(
            "the stored discovery data is not JSON: {}",
            stratus_runtime::redact::json(&e)
        ))),
    }
}

/// The discovery document: `base` with the discovered keys replaced.
pub fn document(mut base: Map<String, Value>, inv: &Inventory) -> Result<Vec<u8>, DiscoveryError> {
    let mut flavors: Vec<&Flavor> = inv.flavors.iter().collect();
    flavors.sort_by(|a, b| a.name.cmp(&b.name));
    flavors.dedup_by(|a, b| a.name == b.name);
    if flavors.is_empty() {
        return Err(DiscoveryError::Input("Nova lists no flavor".into()));
    }
    let mut images: Vec<&Image> = inv
        .images
        .iter()
        .filter(|i| i.name.as_deref().is_some_and(|n| !n.is_empty()))
        .collect();
    images.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    let image_names: BTreeSet<&str> = images.iter().filter_map(|i| i.name.as_deref()).collect();
    if image_names.is_empty() {
        return Err(DiscoveryError::Input("Glance lists no named image".into()));
    }
    if inv.volume_types.is_empty() {
        return Err(DiscoveryError::Input("Cinder lists no volume type".into()));
    }
    let mut volume_types: Vec<&VolumeType> = inv.volume_types.iter().collect();
    volume_types.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));

    // Zones the installer chose win; otherwise Nova's available ones.
    let stored_zones = base
        .get("zones")
        .and_then(Value::as_array)
        .filter(|z| !z.is_empty())
        .cloned();
    let zones = stored_zones.unwrap_or_else(|| {
        inv.zones
            .iter()
            .filter(|z| z.state.available)
            .map(|z| z.name.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(Value::String)
            .collect()
    });
    let instances = base.get("instances").cloned().unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();

    let discovered = json!({
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "OpenStackCloudProviderDiscoveryData",
        "flavors": flavors.iter().map(|f| &f.name).collect::<Vec<_>>(),
        "flavorsDetails": flavors.iter().map(|f| json!({
            "name": f.name, "ram": f.ram, "vcpus": f.vcpus, "disk": f.disk,
        })).collect::<Vec<_>>(),
        "additionalNetworks": names(&inv.networks),
        "additionalSecurityGroups": names(&inv.security_groups),
        "defaultImageName": text(&instances["imageName"]),
        "images": image_names,
        "imagesDetails": images.iter().map(|i| json!({
            "id": i.id, "name": i.name, "createdAt": i.created_at,
            "defaultVolumeType": i.cinder_img_volume_type.clone().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "mainNetwork": text(&instances["mainNetwork"]),
        "zones": zones,
        "volumeTypes": volume_types.iter().map(|t| json!({
            "id": t.id, "name": t.name,
            "description": t.description.clone().unwrap_or_default(),
            "extraSpecs": t.extra_specs.clone().unwrap_or_default(),
            "isPublic": t.is_public.or(t.access_is_public).unwrap_or(true),
            "isDefault": inv.default_volume_type.as_deref() == Some(t.id.as_str()),
            "qosSpecID": t.qos_specs_id.clone().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "serverGroups": names(&inv.server_groups),
    });
    if let Value::Object(map) = discovered {
        base.extend(map);
    }
    serde_json::to_vec(&Value::Object(base))
        .map_err(|e| DiscoveryError::Input(format!("cannot encode the discovery data: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> Named {
        Named {
            name: Some(n.into()),
        }
    }

    fn inventory() -> Inventory {
        Inventory {
            flavors: vec![
                Flavor {
                    name: "m1.large".into(),
                    vcpus: 4,
                    ram: 8192,
                    disk: 80,
                    ephemeral: 0,
                },
                Flavor {
                    name: "m1.small".into(),
                    vcpus: 1,
                    ram: 2048,
                    disk: 0,
                    ephemeral: 20,
                },
            ],
            images: vec![
                Image {
                    id: "i2".into(),
                    name: Some("ubuntu-24-04".into()),
                    created_at: "2026-01-02T00:00:00Z".into(),
                    cinder_img_volume_type: None,
                },
                Image {
                    id: "i1".into(),
                    name: Some("ubuntu-22-04".into()),
                    created_at: "2026-01-01T00:00:00Z".into(),
                    cinder_img_volume_type: Some("ssd".into()),
                },
                Image {
                    id: "i3".into(),
                    name: None,
                    created_at: String::new(),
                    cinder_img_volume_type: None,
                },
            ],
            networks: vec![named("shared"), named("internal"), named("shared")],
            security_groups: vec![named("default")],
            zones: vec![
                Zone {
                    name: "nova".into(),
                    state: ZoneState { available: true },
                },
                Zone {
                    name: "down".into(),
                    state: ZoneState { available: false },
                },
            ],
            volume_types: vec![
                VolumeType {
                    id: "t2".into(),
                    name: "ssd".into(),
                    description: Some("Fast".into()),
                    extra_specs: None,
                    is_public: Some(true),
                    access_is_public: None,
                    qos_specs_id: None,
                },
                VolumeType {
                    id: "t1".into(),
                    name: "__DEFAULT__".into(),
                    description: None,
                    extra_specs: None,
                    is_public: None,
                    access_is_public: Some(true),
                    qos_specs_id: Some("q".into()),
                },
            ],
            default_volume_type: Some("t1".into()),
            server_groups: vec![named("etcd")],
        }
    }

    #[test]
    fn volume_types_parse_with_both_public_keys() {
        let t: VolumeType = serde_json::from_str(
            r#"{"id": "t", "name": "n", "is_public": false, "os-volume-type-access:is_public": false, "extra_specs": {}}"#,
        )
        .unwrap();
        assert_eq!(
            (t.is_public, t.access_is_public),
            (Some(false), Some(false))
        );
    }

    #[test]
    fn flavors_become_instance_types_with_the_ephemeral_disk_as_fallback() {
        let inv = inventory();
        let types: Vec<_> = inv.flavors.iter().map(instance_type).collect();
        assert_eq!(
            types[0],
            InstanceType {
                name: "m1.large".into(),
                cpu: "4".into(),
                memory: "8192Mi".into(),
                root_disk: "80Gi".into()
            }
        );
        assert_eq!(types[1].root_disk, "20Gi");
    }

    #[test]
    fn the_document_keeps_stored_keys_and_names_defaults() {
        let stored = br#"{"instances": {"imageName": "ubuntu-22-04", "mainNetwork": "internal", "sshKeyPairName": "k"},
                          "podNetworkMode": "DirectRoutingWithPortSecurityEnabled", "flavors": ["stale"]}"#;
        let doc: Value = serde_json::from_slice(
            &document(base_document(stored, None).unwrap(), &inventory()).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["kind"], "OpenStackCloudProviderDiscoveryData");
        assert_eq!(doc["apiVersion"], "deckhouse.io/v1alpha1");
        assert_eq!(
            doc["podNetworkMode"],
            "DirectRoutingWithPortSecurityEnabled"
        );
        assert_eq!(doc["instances"]["sshKeyPairName"], "k");
        assert_eq!(doc["flavors"], json!(["m1.large", "m1.small"]));
        assert_eq!(
            doc["flavorsDetails"][1],
            json!({"name": "m1.small", "ram": 2048, "vcpus": 1, "disk": 0})
        );
        assert_eq!(doc["defaultImageName"], "ubuntu-22-04");
        assert_eq!(doc["mainNetwork"], "internal");
        assert_eq!(doc["images"], json!(["ubuntu-22-04", "ubuntu-24-04"]));
        assert_eq!(doc["imagesDetails"][0]["defaultVolumeType"], "ssd");
        assert_eq!(doc["imagesDetails"][0]["createdAt"], "2026-01-01T00:00:00Z");
        assert_eq!(doc["additionalNetworks"], json!(["internal", "shared"]));
        assert_eq!(doc["additionalSecurityGroups"], json!(["default"]));
        assert_eq!(doc["zones"], json!(["nova"]));
        assert_eq!(doc["serverGroups"], json!(["etcd"]));
        assert_eq!(doc["volumeTypes"][0]["name"], "__DEFAULT__");
        assert_eq!(doc["volumeTypes"][0]["isDefault"], true);
        assert_eq!(doc["volumeTypes"][0]["isPublic"], true);
        assert_eq!(doc["volumeTypes"][0]["qosSpecID"], "q");
        assert_eq!(doc["volumeTypes"][1]["isDefault"], false);
    }

    #[test]
    fn stored_zones_win_and_module_config_stands_in_for_missing_data() {
        let doc: Value = serde_json::from_slice(
            &document(
                base_document(br#"{"zones": ["az-b", "az-a"]}"#, None).unwrap(),
                &inventory(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(doc["zones"], json!(["az-b", "az-a"]));
        let config = json!({"instances": {"imageName": "from-config"}});
        let doc: Value = serde_json::from_slice(
            &document(base_document(b"", Some(&config)).unwrap(), &inventory()).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["defaultImageName"], "from-config");
        assert_eq!(doc["mainNetwork"], "");
    }

    #[test]
    fn the_same_inventory_in_another_order_gives_the_same_bytes() {
        let a = document(Map::new(), &inventory()).unwrap();
        let mut inv = inventory();
        inv.flavors.reverse();
        inv.images.reverse();
        inv.networks.reverse();
        inv.volume_types.reverse();
        assert_eq!(a, document(Map::new(), &inv).unwrap());
    }

    #[test]
    fn an_unusable_cloud_or_stored_document_is_an_input_error() {
        for (field, message) in [
            ("flavors", "no flavor"),
            ("images", "no named image"),
            ("volume_types", "no volume type"),
        ] {
            let mut inv = inventory();
            match field {
                "flavors" => inv.flavors.clear(),
                "images" => inv.images.retain(|i| i.name.is_none()),
                _ => inv.volume_types.clear(),
            }
            let err = document(Map::new(), &inv).unwrap_err();
            assert!(err.to_string().contains(message), "{err}");
            assert!(!err.is_retryable());
        }
        assert!(base_document(b"[1]", None).is_err());
        assert!(base_document(b"{", None)
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
    }
}
