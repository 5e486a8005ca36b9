//! The node-manager registration Secrets `kube-system/d8-node-manager-cloud-provider` and
//! `…-<cloud>` (pure): every key derived from the provider cluster configuration
//! (`cloud-provider-cluster-configuration.yaml`), the discovery data and, for OpenStack and DVP,
//! the module settings that patch them. A missing required key is an error naming it; no value
//! is ever quoted.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::{Cloud, PlanError};

/// The names of the two identical Secrets.
pub fn secret_names(cloud: Cloud) -> [String; 2] {
    [
        "d8-node-manager-cloud-provider".to_string(),
        format!("d8-node-manager-cloud-provider-{}", cloud.name()),
    ]
}

/// The labels node-manager finds them by.
pub fn labels(cloud: Cloud) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "cloud-provider.deckhouse.io/registration".to_string(),
            String::new(),
        ),
        (
            "cloud-provider.deckhouse.io/name".to_string(),
            cloud.name().to_string(),
        ),
    ])
}

/// Where the keys come from.
#[derive(Debug, Clone, Default)]
pub struct Sources<'a> {
    /// The provider cluster configuration (parsed YAML); `Null` when absent.
    pub cluster_configuration: &'a Value,
    /// The discovery data; `Null` when absent.
    pub discovery: &'a Value,
    /// The module settings (`spec.settings` or chart values); `Null` when none.
    pub settings: &'a Value,
}

/// The Secret data (plain text; the driver encodes it) for `cloud`.
pub fn plan(cloud: Cloud, sources: &Sources<'_>) -> Result<BTreeMap<String, String>, PlanError> {
    match cloud {
        Cloud::Aws => aws(sources),
        Cloud::OpenStack => openstack(sources),
        Cloud::Dvp => Ok(dvp(sources)),
    }
}

fn text<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    at(v, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .filter(|v| !v.is_null())
}

fn required<'v>(v: &'v Value, path: &[&str], source: &str) -> Result<&'v str, PlanError> {
    text(v, path)
        .ok_or_else(|| PlanError::key(&format!("{source}: {}", path.join(".")), "required"))
}

fn common(
    cloud: Cloud,
    region: &str,
    zones: &Value,
    instance_class: (&str, &str),
    machine_class: &str,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("type".to_string(), cloud.name().to_string()),
        ("region".to_string(), region.to_string()),
        ("zones".to_string(), zones.to_string()),
        (
            "instanceClassKind".to_string(),
            instance_class.0.to_string(),
        ),
        (
            "instanceClassAPIVersion".to_string(),
            instance_class.1.to_string(),
        ),
        ("machineClassKind".to_string(), machine_class.to_string()),
    ])
}

const PCC: &str = "cloud-provider-cluster-configuration.yaml";

fn aws(s: &Sources<'_>) -> Result<BTreeMap<String, String>, PlanError> {
    let pcc = s.cluster_configuration;
    let d = s.discovery;
    let region = required(pcc, &["provider", "region"], PCC)?;
    let zones = at(d, &["zones"])
        .or_else(|| at(pcc, &["zones"]))
        .cloned()
        .unwrap_or(json!([]));
    let mut data = common(
        Cloud::Aws,
        region,
        &zones,
        ("AWSInstanceClass", "v1"),
        "AWSMachineClass",
    );
    if let Some(key) = text(pcc, &["sshPublicKey"]) {
        data.insert("sshPublicKey".into(), key.into());
    }
    let provider = json!({
        "providerAccessKeyId": text(pcc, &["provider", "providerAccessKeyId"]).unwrap_or_default(),
        "providerSecretAccessKey": text(pcc, &["provider", "providerSecretAccessKey"]).unwrap_or_default(),
        "region": region,
        "instances": at(d, &["instances"]).cloned().unwrap_or(json!({})),
        "internal": {"zoneToSubnetIdMap": at(d, &["zoneToSubnetIdMap"]).cloned().unwrap_or(json!({}))},
        "loadBalancerSecurityGroup": text(d, &["loadBalancerSecurityGroup"]).unwrap_or_default(),
        "keyName": text(d, &["keyName"]).unwrap_or_default(),
        "tags": at(pcc, &["tags"]).cloned().unwrap_or(json!({})),
    });
    data.insert("aws".into(), provider.to_string());
    Ok(data)
}

/// OpenStack's `connection` (the registration's, and what the module authenticates with): PCC
/// `provider` patched by the settings' `connection`, every required key checked, one of
/// `tenantName` and `tenantID`, `caCert` when given.
pub fn openstack_connection(
    cluster_configuration: &Value,
    settings: &Value,
) -> Result<Value, PlanError> {
    let mut connection = at(cluster_configuration, &["provider"])
        .cloned()
        .unwrap_or(json!({}));
    merge(&mut connection, at(settings, &["connection"]));
    let source = "provider (with settings.connection)";
    let mut conn = Map::new();
    for key in ["authURL", "username", "password", "domainName", "region"] {
        conn.insert(key.into(), json!(required(&connection, &[key], source)?));
    }
    match (
        text(&connection, &["tenantName"]),
        text(&connection, &["tenantID"]),
    ) {
        (Some(name), None) => conn.insert("tenantName".into(), json!(name)),
        (None, Some(id)) => conn.insert("tenantID".into(), json!(id)),
        (Some(_), Some(_)) => {
            return Err(PlanError::key(
                &format!("{source}: tenantName, tenantID"),
                "only one of them may be set",
            ))
        }
        (None, None) => {
            return Err(PlanError::key(
                &format!("{source}: tenantName or tenantID"),
                "required",
            ))
        }
    };
    if let Some(ca) = text(&connection, &["caCert"]) {
        conn.insert("caCert".into(), json!(ca));
    }
    Ok(Value::Object(conn))
}

/// OpenStack: the connection, and the discovery data patched by the settings' network keys,
/// `instances` and `zones`.
fn openstack(s: &Sources<'_>) -> Result<BTreeMap<String, String>, PlanError> {
    let conn = openstack_connection(s.cluster_configuration, s.settings)?;
    let mut discovery = s.discovery.clone();
    if !discovery.is_object() {
        discovery = json!({});
    }
    for key in [
        "internalNetworkNames",
        "externalNetworkNames",
        "podNetworkMode",
        "zones",
        "externalNetworkDHCP",
    ] {
        if let Some(v) = at(s.settings, &[key]) {
            discovery[key] = v.clone();
        }
    }
    if let Some(instances) = at(s.settings, &["instances"]) {
        let mut merged = discovery.get("instances").cloned().unwrap_or(json!({}));
        merge(&mut merged, Some(instances));
        discovery["instances"] = merged;
    }
    let internal = at(&discovery, &["internalNetworkNames"])
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        .ok_or_else(|| {
            PlanError::key(
                "discovery data (with settings): internalNetworkNames",
                "required",
            )
        })?;
    let region = conn["region"].as_str().unwrap_or_default().to_string();
    let zones = at(&discovery, &["zones"]).cloned().unwrap_or(json!([]));
    let mut data = common(
        Cloud::OpenStack,
        &region,
        &zones,
        ("OpenStackInstanceClass", "v1"),
        "OpenStackMachineClass",
    );
    if let Some(key) = text(s.cluster_configuration, &["sshPublicKey"]) {
        data.insert("sshPublicKey".into(), key.into());
    }
    let mut provider = json!({
        "connection": conn,
        "internalNetworkNames": internal,
        "podNetworkMode": text(&discovery, &["podNetworkMode"]).unwrap_or("DirectRoutingWithPortSecurityEnabled"),
    });
    for key in ["instances", "externalNetworkNames", "externalNetworkDHCP"] {
        if let Some(v) = at(&discovery, &[key]) {
            provider[key] = v.clone();
        }
    }
    data.insert("openstack".into(), provider.to_string());
    Ok(data)
}

fn dvp(s: &Sources<'_>) -> BTreeMap<String, String> {
    let zones = at(s.settings, &["nodes", "parameters", "zones"])
        .or_else(|| at(s.discovery, &["zones"]))
        .or_else(|| at(s.cluster_configuration, &["zones"]))
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or(json!(["default"]));
    let mut data = common(
        Cloud::Dvp,
        "default",
        &zones,
        ("DVPInstanceClass", "v1alpha1"),
        "",
    );
    for (k, v) in [
        ("capiClusterName", "dvp"),
        ("capiClusterKind", "DeckhouseCluster"),
        (
            "capiClusterAPIVersion",
            "infrastructure.cluster.x-k8s.io/v1alpha1",
        ),
        ("capiClusterAPIGroup", "infrastructure.cluster.x-k8s.io"),
        ("capiMachineTemplateKind", "DeckhouseMachineTemplate"),
        (
            "capiMachineTemplateAPIVersion",
            "infrastructure.cluster.x-k8s.io/v1alpha1",
        ),
        (
            "capiMachineTemplateAPIGroup",
            "infrastructure.cluster.x-k8s.io",
        ),
    ] {
        data.insert(k.into(), v.into());
    }
    if let Some(key) = text(s.settings, &["nodes", "parameters", "sshPublicKey"])
        .or_else(|| text(s.cluster_configuration, &["sshPublicKey"]))
    {
        data.insert("sshPublicKey".into(), key.into());
    }
    let mut provider = json!({});
    if let Some(labels) = at(s.cluster_configuration, &["provider", "additionalVMLabels"])
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    {
        provider["additionalVMLabels"] = labels.clone();
    }
    data.insert("dvp".into(), provider.to_string());
    data
}

/// Overlays `patch`'s keys onto `base` (objects only; one level).
fn merge(base: &mut Value, patch: Option<&Value>) {
    if let (Some(base), Some(Value::Object(patch))) = (base.as_object_mut(), patch) {
        for (k, v) in patch {
            if !v.is_null() {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(data: &BTreeMap<String, String>, key: &str) -> Value {
        serde_json::from_str(&data[key]).unwrap()
    }

    #[test]
    fn aws_from_configuration_and_discovery() {
        let pcc = json!({"provider": {"region": "eu-central-1", "providerAccessKeyId": "AK", "providerSecretAccessKey": "SK"},
                         "tags": {"team": "a"}, "sshPublicKey": "ssh-ed25519 K"});
        let d = json!({"zones": ["eu-central-1a"], "keyName": "k", "loadBalancerSecurityGroup": "sg-lb",
                       "zoneToSubnetIdMap": {"eu-central-1a": "subnet-1"},
                       "instances": {"ami": "ami-1", "iamProfileName": "p", "additionalSecurityGroups": ["sg-1"], "associatePublicIPAddress": false}});
        let data = plan(
            Cloud::Aws,
            &Sources {
                cluster_configuration: &pcc,
                discovery: &d,
                settings: &Value::Null,
            },
        )
        .unwrap();
        assert_eq!(data["type"], "aws");
        assert_eq!(data["region"], "eu-central-1");
        assert_eq!(parsed(&data, "zones"), json!(["eu-central-1a"]));
        assert_eq!(data["sshPublicKey"], "ssh-ed25519 K");
        let aws = parsed(&data, "aws");
        assert_eq!(
            aws["internal"]["zoneToSubnetIdMap"]["eu-central-1a"],
            "subnet-1"
        );
        assert_eq!(aws["tags"], json!({"team": "a"}));
        assert_eq!(aws["instances"]["ami"], "ami-1");
        assert_eq!(aws["providerSecretAccessKey"], "SK");
        let err = plan(
            Cloud::Aws,
            &Sources {
                cluster_configuration: &json!({}),
                discovery: &d,
                settings: &Value::Null,
            },
        )
        .unwrap_err();
        assert_eq!(
            err.0,
            "cloud-provider-cluster-configuration.yaml: provider.region: required"
        );
    }

    #[test]
    fn openstack_settings_patch_configuration_and_tenant_rules() {
        let pcc = json!({"provider": {"authURL": "https://k/v3", "username": "u", "password": "p", "domainName": "d", "region": "r1", "tenantName": "t"}});
        let d = json!({"internalNetworkNames": ["int"], "zones": ["nova"], "instances": {"imageName": "img", "mainNetwork": "int"}});
        let settings = json!({"connection": {"region": "r2"}, "instances": {"sshKeyPairName": "kp"}, "externalNetworkNames": ["ext"]});
        let data = plan(
            Cloud::OpenStack,
            &Sources {
                cluster_configuration: &pcc,
                discovery: &d,
                settings: &settings,
            },
        )
        .unwrap();
        assert_eq!(data["region"], "r2");
        let os = parsed(&data, "openstack");
        assert_eq!(os["connection"]["tenantName"], "t");
        assert_eq!(
            os["instances"],
            json!({"imageName": "img", "mainNetwork": "int", "sshKeyPairName": "kp"})
        );
        assert_eq!(os["externalNetworkNames"], json!(["ext"]));
        let both = json!({"connection": {"tenantID": "id"}});
        let err = plan(
            Cloud::OpenStack,
            &Sources {
                cluster_configuration: &pcc,
                discovery: &d,
                settings: &both,
            },
        )
        .unwrap_err();
        assert!(err.0.contains("tenantName, tenantID"), "{err}");
        let no_net = plan(
            Cloud::OpenStack,
            &Sources {
                cluster_configuration: &pcc,
                discovery: &json!({}),
                settings: &Value::Null,
            },
        )
        .unwrap_err();
        assert_eq!(
            no_net.0,
            "discovery data (with settings): internalNetworkNames: required"
        );
    }

    #[test]
    fn dvp_defaults_and_labels() {
        let data = plan(
            Cloud::Dvp,
            &Sources {
                cluster_configuration: &Value::Null,
                discovery: &Value::Null,
                settings: &Value::Null,
            },
        )
        .unwrap();
        assert_eq!(parsed(&data, "zones"), json!(["default"]));
        assert_eq!(data["machineClassKind"], "");
        assert_eq!(data["capiClusterName"], "dvp");
        assert_eq!(parsed(&data, "dvp"), json!({}));
        assert!(!data.contains_key("sshPublicKey"));
        let pcc = json!({"provider": {"additionalVMLabels": {"a": "b"}}, "sshPublicKey": "k"});
        let settings = json!({"nodes": {"parameters": {"zones": ["z1"]}}});
        let data = plan(
            Cloud::Dvp,
            &Sources {
                cluster_configuration: &pcc,
                discovery: &Value::Null,
                settings: &settings,
            },
        )
        .unwrap();
        assert_eq!(parsed(&data, "zones"), json!(["z1"]));
        assert_eq!(
            parsed(&data, "dvp"),
            json!({"additionalVMLabels": {"a": "b"}})
        );
        assert_eq!(data["sshPublicKey"], "k");
    }
}
