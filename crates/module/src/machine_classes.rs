//! The machine classes node-manager renders per node group and zone (pure): AWS's
//! `AWSMachineClass` (`machine.sapcloud.io/v1alpha1`, machine-controller-manager's shape) from
//! the instance class, the registration data and the cluster's UUID.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::PlanError;

/// Where machine classes live.
pub const NAMESPACE: &str = "d8-cloud-instance-manager";

/// `<node group>-<first 8 hex digits of sha256(cluster UUID + zone)>`.
pub fn class_name(node_group: &str, cluster_uuid: &str, zone: &str) -> String {
    let digest = Sha256::digest(format!("{cluster_uuid}{zone}").as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{node_group}-{hex}")
}

/// One AWS node group in one zone.
#[derive(Debug, Clone)]
pub struct AwsMachine<'a> {
    /// The node group.
    pub node_group: &'a str,
    /// The zone.
    pub zone: &'a str,
    /// The cluster's UUID.
    pub cluster_uuid: &'a str,
    /// The `AWSInstanceClass` spec.
    pub instance_class: &'a Value,
    /// The registration's `aws` document (`instances`, `internal.zoneToSubnetIdMap`, `keyName`,
    /// `region`, `tags`).
    pub provider: &'a Value,
}

/// The `AWSMachineClass` for `m`; a zone without a subnet or a class without an AMI (and none
/// discovered) is an error naming the key.
pub fn aws_machine_class(m: &AwsMachine<'_>) -> Result<Value, PlanError> {
    let class = m.instance_class;
    let p = m.provider;
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let ami = s(class, "ami")
        .or_else(|| p.get("instances").and_then(|i| s(i, "ami")))
        .ok_or_else(|| {
            PlanError::key(
                "instanceClass.ami",
                "required (the discovery data has none either)",
            )
        })?;
    let instance_type = s(class, "instanceType")
        .ok_or_else(|| PlanError::key("instanceClass.instanceType", "required"))?;
    let subnet = p
        .pointer("/internal/zoneToSubnetIdMap")
        .and_then(|map| map.get(m.zone))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            PlanError::key(
                &format!("internal.zoneToSubnetIdMap.{}", m.zone),
                "no subnet for the zone",
            )
        })?;
    let mut groups: Vec<String> = Vec::new();
    for g in [
        p.pointer("/instances/additionalSecurityGroups"),
        class.get("additionalSecurityGroups"),
    ]
    .into_iter()
    .flatten()
    .filter_map(Value::as_array)
    .flatten()
    .filter_map(Value::as_str)
    {
        if !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    let mut tags = Map::new();
    tags.insert(
        format!("kubernetes.io/cluster/{}", m.cluster_uuid),
        json!("1"),
    );
    tags.insert(format!("kubernetes.io/role/{}", m.cluster_uuid), json!("1"));
    for source in [p.get("tags"), class.get("additionalTags")]
        .into_iter()
        .flatten()
    {
        if let Some(o) = source.as_object() {
            tags.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut ebs = json!({
        "volumeSize": class.get("diskSizeGb").cloned().unwrap_or(json!(20)),
        "volumeType": s(class, "diskType").unwrap_or_else(|| "gp2".into()),
    });
    if let Some(iops) = class.get("iops").filter(|v| !v.is_null()) {
        ebs["iops"] = iops.clone();
    }
    let name = class_name(m.node_group, m.cluster_uuid, m.zone);
    let mut spec = json!({
        "ami": ami,
        "region": s(p, "region").unwrap_or_default(),
        "machineType": instance_type,
        "iam": {"name": p.pointer("/instances/iamProfileName").and_then(Value::as_str).unwrap_or_default()},
        "keyName": s(p, "keyName").unwrap_or_default(),
        "sourceDestCheck": false,
        "networkInterfaces": [{
            "subnetID": subnet,
            "associatePublicIPAddress": p.pointer("/instances/associatePublicIPAddress").and_then(Value::as_bool).unwrap_or(false),
            "deleteOnTermination": true,
            "securityGroupIDs": groups,
        }],
        "useMachineNameAsNodeName": true,
        "tags": tags,
        "blockDevices": [{"ebs": ebs}],
        "secretRef": {"name": name, "namespace": NAMESPACE},
    });
    if class.get("spot").and_then(Value::as_bool) == Some(true) {
        spec["spotPrice"] = json!("");
    }
    let mut object = json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "AWSMachineClass",
        "metadata": {"name": name, "namespace": NAMESPACE},
    });
    if let (Some(o), Value::Object(spec)) = (object.as_object_mut(), spec) {
        o.insert("spec".into(), Value::Object(spec));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_is_the_group_and_a_hash_of_cluster_and_zone() {
        let a = class_name("worker", "uuid", "eu-central-1a");
        assert!(a.starts_with("worker-") && a.len() == "worker-".len() + 8);
        assert_ne!(a, class_name("worker", "uuid", "eu-central-1b"));
    }

    #[test]
    fn every_field_mapped_from_class_and_registration() {
        let provider = json!({"region": "eu-central-1", "keyName": "k", "tags": {"team": "a", "env": "prod"},
            "instances": {"ami": "ami-disc", "iamProfileName": "node", "associatePublicIPAddress": true, "additionalSecurityGroups": ["sg-1", "sg-2"]},
            "internal": {"zoneToSubnetIdMap": {"eu-central-1a": "subnet-a"}}});
        let class = json!({"instanceType": "m5.large", "spot": true, "additionalSecurityGroups": ["sg-2", "sg-3"],
            "additionalTags": {"env": "dev"}, "diskType": "gp3", "diskSizeGb": 50, "iops": 4000});
        let m = |class: &Value, zone: &'static str| {
            aws_machine_class(&AwsMachine {
                node_group: "worker",
                zone,
                cluster_uuid: "u1",
                instance_class: class,
                provider: &provider,
            })
        };
        let mc = m(&class, "eu-central-1a").unwrap();
        let spec = &mc["spec"];
        assert_eq!(spec["ami"], "ami-disc");
        assert_eq!(spec["machineType"], "m5.large");
        assert_eq!(spec["spotPrice"], "");
        assert_eq!(spec["iam"]["name"], "node");
        let nic = &spec["networkInterfaces"][0];
        assert_eq!(nic["subnetID"], "subnet-a");
        assert_eq!(nic["associatePublicIPAddress"], true);
        assert_eq!(nic["securityGroupIDs"], json!(["sg-1", "sg-2", "sg-3"]));
        assert_eq!(
            spec["tags"],
            json!({"kubernetes.io/cluster/u1": "1", "kubernetes.io/role/u1": "1", "team": "a", "env": "dev"})
        );
        assert_eq!(
            spec["blockDevices"][0]["ebs"],
            json!({"volumeSize": 50, "volumeType": "gp3", "iops": 4000})
        );
        assert_eq!(spec["secretRef"]["name"], mc["metadata"]["name"]);
        let plain = m(
            &json!({"instanceType": "t3.small", "ami": "ami-own"}),
            "eu-central-1a",
        )
        .unwrap();
        assert_eq!(plain["spec"]["ami"], "ami-own");
        assert_eq!(
            plain["spec"]["blockDevices"][0]["ebs"],
            json!({"volumeSize": 20, "volumeType": "gp2"})
        );
        assert!(plain["spec"].get("spotPrice").is_none());
        assert_eq!(
            m(&class, "eu-central-1b").unwrap_err().0,
            "internal.zoneToSubnetIdMap.eu-central-1b: no subnet for the zone"
        );
    }
}
