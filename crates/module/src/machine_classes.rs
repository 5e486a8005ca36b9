//! The machine classes node-manager renders per node group and zone (pure): AWS's
//! `AWSMachineClass` (`machine.sapcloud.io/v1alpha1`, machine-controller-manager's shape) from
//! the instance class, the registration data and the cluster's UUID; OpenStack's
//! `OpenStackMachineClass` likewise.

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
    let groups = unique(
        strings(p.pointer("/instances/additionalSecurityGroups"))
            .into_iter()
            .chain(strings(class.get("additionalSecurityGroups"))),
    );
    let mut tags = Map::new();
    tags.insert(
        format!("kubernetes.io/cluster/{}", m.cluster_uuid),
        json!("1"),
    );
    tags.insert(format!("kubernetes.io/role/{}", m.cluster_uuid), json!("1"));
    overlay(&mut tags, &[p.get("tags"), class.get("additionalTags")]);
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

/// One OpenStack node group in one zone.
#[derive(Debug, Clone)]
pub struct OpenStackMachine<'a> {
    /// The node group.
    pub node_group: &'a str,
    /// The zone.
    pub zone: &'a str,
    /// The cluster's UUID.
    pub cluster_uuid: &'a str,
    /// The `OpenStackInstanceClass` spec.
    pub instance_class: &'a Value,
    /// The registration's `openstack` document (`connection.region`, `instances`,
    /// `internalNetworkNames`, `podNetworkMode`, `externalNetworkDHCP`).
    pub provider: &'a Value,
    /// The cluster's tags (the provider configuration's `tags`).
    pub tags: &'a Value,
    /// The cluster's pod subnet.
    pub pod_subnet: &'a str,
}

/// The `OpenStackMachineClass` for `m`; a class without an image or a main network (and none in
/// the discovery data) is an error naming the key.
pub fn openstack_machine_class(m: &OpenStackMachine<'_>) -> Result<Value, PlanError> {
    let class = m.instance_class;
    let p = m.provider;
    let s = |v: Option<&Value>, k: &str| {
        v.and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let instances = p.get("instances");
    let flavor = s(Some(class), "flavorName")
        .ok_or_else(|| PlanError::key("instanceClass.flavorName", "required"))?;
    let image = s(Some(class), "imageName")
        .or_else(|| s(instances, "imageName"))
        .ok_or_else(|| {
            PlanError::key(
                "instanceClass.imageName",
                "required (the discovery data has none either)",
            )
        })?;
    let main = s(Some(class), "mainNetwork")
        .or_else(|| s(instances, "mainNetwork"))
        .ok_or_else(|| {
            PlanError::key(
                "instanceClass.mainNetwork",
                "required (the discovery data has none either)",
            )
        })?;
    let additional = match class.get("additionalNetworks").filter(|v| !v.is_null()) {
        Some(v) => strings(Some(v)),
        None => strings(instances.and_then(|i| i.get("additionalNetworks"))),
    };
    let internal = strings(p.get("internalNetworkNames"));
    let port_security = p.get("podNetworkMode").and_then(Value::as_str)
        == Some("DirectRoutingWithPortSecurityEnabled");
    let networks: Vec<Value> = unique(std::iter::once(main).chain(additional))
        .into_iter()
        .map(|name| {
            let pod_network = port_security && internal.contains(&name);
            let mut network = json!({ "name": name });
            if pod_network {
                network["podNetwork"] = json!(true);
            }
            network
        })
        .collect();
    let groups = unique(
        strings(instances.and_then(|i| i.get("securityGroups")))
            .into_iter()
            .chain(strings(class.get("additionalSecurityGroups"))),
    );
    let mut tags = Map::new();
    overlay(&mut tags, &[Some(m.tags), class.get("additionalTags")]);
    tags.insert(
        format!("kubernetes.io-cluster-deckhouse-{}", m.cluster_uuid),
        json!("1"),
    );
    tags.insert(
        format!("kubernetes.io-role-deckhouse-{}-{}", m.node_group, m.zone),
        json!("1"),
    );
    let name = class_name(m.node_group, m.cluster_uuid, m.zone);
    let dhcp = p
        .get("externalNetworkDHCP")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let mut spec = json!({
        "region": p.pointer("/connection/region").and_then(Value::as_str).unwrap_or_default(),
        "availabilityZone": m.zone,
        "useConfigDrive": !dhcp,
        "flavorName": flavor,
        "imageName": image,
        "networks": networks,
        "podNetworkCidr": m.pod_subnet,
        "keyName": s(instances, "sshKeyPairName").unwrap_or_default(),
        "tags": tags,
        "secretRef": {"name": name, "namespace": NAMESPACE},
    });
    if !groups.is_empty() {
        spec["securityGroups"] = json!(groups);
    }
    if let Some(size) = class.get("rootDiskSize").filter(|v| !v.is_null()) {
        spec["rootDiskSize"] = size.clone();
    }
    Ok(json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "OpenStackMachineClass",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
}

/// The `DeckhouseMachineTemplate` (`infrastructure.cluster.x-k8s.io/v1alpha1`) node-manager
/// names `template_name` for `node_group`, from a `DVPInstanceClass` spec; its
/// `checksum/instance-class` annotation is the sha256 of that spec, so a changed class gives a
/// new template and Cluster API rolls the machines.
pub fn dvp_machine_template(
    template_name: &str,
    node_group: &str,
    instance_class: &Value,
) -> Result<Value, PlanError> {
    let vm = instance_class
        .get("virtualMachine")
        .filter(|v| v.is_object())
        .ok_or_else(|| PlanError::key("instanceClass.virtualMachine", "required"))?;
    let root = instance_class
        .get("rootDisk")
        .filter(|v| v.is_object())
        .ok_or_else(|| PlanError::key("instanceClass.rootDisk", "required"))?;
    let text = |v: &Value, path: &str| {
        v.pointer(path)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let image = text(root, "/image/name")
        .ok_or_else(|| PlanError::key("instanceClass.rootDisk.image.name", "required"))?;
    let mut spec = json!({
        "vmClassName": text(vm, "/virtualMachineClassName").unwrap_or_else(|| "generic".into()),
        "bootDiskImageRef": {"kind": text(root, "/image/kind").unwrap_or_else(|| "ClusterVirtualImage".into()), "name": image},
    });
    let mut cpu = Map::new();
    if let Some(cores) = vm.pointer("/cpu/cores").filter(|v| !v.is_null()) {
        cpu.insert("cores".into(), cores.clone());
    }
    if let Some(fraction) = text(vm, "/cpu/coreFraction") {
        cpu.insert("cpuFraction".into(), json!(fraction));
    }
    if !cpu.is_empty() {
        spec["cpu"] = Value::Object(cpu);
    }
    for (field, value) in [
        ("memory", text(vm, "/memory/size")),
        ("bootloader", text(vm, "/bootloader")),
        ("rootDiskSize", text(root, "/size")),
        ("rootDiskStorageClass", text(root, "/storageClass")),
    ] {
        if let Some(v) = value {
            spec[field] = json!(v);
        }
    }
    let disks: Vec<Value> = instance_class
        .get("additionalDisks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| {
            let mut disk = json!({"size": text(d, "/size").unwrap_or_default()});
            if let Some(class) = text(d, "/storageClass") {
                disk["storageClass"] = json!(class);
            }
            disk
        })
        .collect();
    if !disks.is_empty() {
        spec["additionalDisks"] = json!(disks);
    }
    let checksum: String = Sha256::digest(instance_class.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "DeckhouseMachineTemplate",
        "metadata": {
            "name": template_name,
            "namespace": NAMESPACE,
            "labels": {"node-group": node_group},
            "annotations": {"checksum/instance-class": checksum, "helm.sh/resource-policy": "keep"},
        },
        "spec": {"template": {"spec": spec}},
    }))
}

/// [`dvp_machine_template`] named `<node group>-<first 8 hex digits of its checksum>`, so each
/// version of the instance class has its own template; returns the name and the template.
pub fn dvp_node_group_template(
    node_group: &str,
    instance_class: &Value,
) -> Result<(String, Value), PlanError> {
    let mut template = dvp_machine_template("", node_group, instance_class)?;
    let checksum = template["metadata"]["annotations"]["checksum/instance-class"]
        .as_str()
        .unwrap_or_default();
    let name = format!("{node_group}-{}", &checksum[..8]);
    template["metadata"]["name"] = json!(name);
    Ok((name, template))
}

/// The strings of a JSON list (none when absent or not a list).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// `items` without repeats, first occurrence kept.
fn unique(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Lays the keys of each map in `sources` over `tags`, later ones winning.
fn overlay(tags: &mut Map<String, Value>, sources: &[Option<&Value>]) {
    for o in sources.iter().flatten().filter_map(|v| v.as_object()) {
        tags.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
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

    #[test]
    fn openstack_fields_mapped_from_class_and_registration() {
        let provider = json!({"connection": {"region": "RegionOne"}, "internalNetworkNames": ["int"],
            "podNetworkMode": "DirectRoutingWithPortSecurityEnabled", "externalNetworkDHCP": false,
            "instances": {"imageName": "ubuntu", "mainNetwork": "int", "sshKeyPairName": "kp", "securityGroups": ["sg-a"], "additionalNetworks": ["ext"]}});
        let class = json!({"flavorName": "m1.large", "additionalSecurityGroups": ["sg-a", "sg-b"], "rootDiskSize": 30, "additionalTags": {"role": "w"}});
        let tags = json!({"team": "a"});
        let mc = openstack_machine_class(&OpenStackMachine {
            node_group: "worker",
            zone: "nova",
            cluster_uuid: "u1",
            instance_class: &class,
            provider: &provider,
            tags: &tags,
            pod_subnet: "10.111.0.0/16",
        })
        .unwrap();
        let spec = &mc["spec"];
        assert_eq!(spec["imageName"], "ubuntu");
        assert_eq!(spec["useConfigDrive"], true);
        assert_eq!(
            spec["networks"],
            json!([{"name": "int", "podNetwork": true}, {"name": "ext"}])
        );
        assert_eq!(spec["securityGroups"], json!(["sg-a", "sg-b"]));
        assert_eq!(spec["rootDiskSize"], 30);
        assert_eq!(
            spec["tags"],
            json!({"team": "a", "role": "w", "kubernetes.io-cluster-deckhouse-u1": "1", "kubernetes.io-role-deckhouse-worker-nova": "1"})
        );
        let no_image = json!({"flavorName": "f"});
        let bare = json!({"connection": {"region": "r"}});
        let err = openstack_machine_class(&OpenStackMachine {
            node_group: "w",
            zone: "z",
            cluster_uuid: "u",
            instance_class: &no_image,
            provider: &bare,
            tags: &Value::Null,
            pod_subnet: "",
        })
        .unwrap_err();
        assert_eq!(
            err.0,
            "instanceClass.imageName: required (the discovery data has none either)"
        );
    }

    #[test]
    fn dvp_template_mapping_and_checksum() {
        let class = json!({"virtualMachine": {"cpu": {"cores": 4, "coreFraction": "50%"}, "memory": {"size": "8Gi"}, "bootloader": "EFI"},
            "rootDisk": {"size": "30Gi", "storageClass": "ceph", "image": {"kind": "VirtualImage", "name": "ubuntu"}},
            "additionalDisks": [{"size": "10Gi", "storageClass": "fast"}, {"size": "5Gi"}]});
        let t = dvp_machine_template("worker-abc", "worker", &class).unwrap();
        assert_eq!(
            t["spec"]["template"]["spec"],
            json!({
            "vmClassName": "generic", "cpu": {"cores": 4, "cpuFraction": "50%"}, "memory": "8Gi", "bootloader": "EFI",
            "rootDiskSize": "30Gi", "rootDiskStorageClass": "ceph",
            "bootDiskImageRef": {"kind": "VirtualImage", "name": "ubuntu"},
            "additionalDisks": [{"size": "10Gi", "storageClass": "fast"}, {"size": "5Gi"}]})
        );
        assert_eq!(t["metadata"]["labels"]["node-group"], "worker");
        let mut bigger = class.clone();
        bigger["virtualMachine"]["memory"]["size"] = json!("16Gi");
        let t2 = dvp_machine_template("worker-abc", "worker", &bigger).unwrap();
        assert_ne!(
            t["metadata"]["annotations"]["checksum/instance-class"],
            t2["metadata"]["annotations"]["checksum/instance-class"]
        );
        let (name, named) = dvp_node_group_template("worker", &class).unwrap();
        let sum = t["metadata"]["annotations"]["checksum/instance-class"]
            .as_str()
            .unwrap();
        assert_eq!(name, format!("worker-{}", &sum[..8]));
        assert_eq!(named["metadata"]["name"], name.as_str());
        assert_eq!(named["spec"], t["spec"]);
        assert_ne!(dvp_node_group_template("worker", &bigger).unwrap().0, name);
        assert_eq!(
            dvp_machine_template("w", "w", &json!({"virtualMachine": {}, "rootDisk": {}}))
                .unwrap_err()
                .0,
            "instanceClass.rootDisk.image.name: required"
        );
    }
}
