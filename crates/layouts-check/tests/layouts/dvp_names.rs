//! Deckhouse's names for the DVP parent objects, derived here on their own (not with the layout's
//! code) from Deckhouse's rules: the takeover states' names match the derivation, and the layout's
//! names match it for every hash input (static and Auto addresses, tolerations, node selector,
//! zones, region, priority class, additional disks).

use std::collections::BTreeSet;

use serde_json::{json, Value};
use stratus_layouts_check::catalog;
use stratus_layouts_check::workspace::Workspace;

use crate::common::{layouts, tofu};
use crate::dvp_takeover::{instance, state, vars, ALLOCATED, NODES};

/// Deckhouse's naming, derived here on its own (not with the layout's code) from its rules: a
/// disk hashes the JSON of what replaces it encoded once more as a JSON string, the VM the JSON
/// of its size, placement, allocated address, SSH key hash and disk hashes.
const DECKHOUSE_NAMES: &str = r#"
variable "prefix" { type = string }
variable "group" { type = string }
variable "index" { type = number }
variable "etcd" { type = bool }
variable "additional_disks" { type = number }
variable "image" { type = object({ kind = string, name = string }) }
variable "cores" { type = number }
variable "core_fraction" { type = string }
variable "memory" { type = string }
variable "zone" { type = string }
variable "region" { type = string }
variable "node_selector" { type = map(string) }
variable "tolerations" { type = list(map(string)) }
variable "priority_class" { type = string }
variable "ssh_public_key" { type = string }
variable "allocated_address" { type = string }
variable "ip_address" { type = string }

locals {
  hostname        = "${var.prefix}-${var.group}-${var.index}"
  root_json       = jsonencode({ rootDisk = { image = { name = var.image.name, type = var.image.kind } } })
  root_hash       = substr(sha256(jsonencode(local.root_json)), 0, 6)
  etcd_json       = jsonencode({ kbernetesDataDisk = {} })
  etcd_hash       = substr(sha256(jsonencode(local.etcd_json)), 0, 6)
  additional_hash = substr(sha256(jsonencode(jsonencode({ additionalDisk = {} }))), 0, 6)
  selector = merge(
    { for k, v in { "topology.kubernetes.io/zone" = var.zone, "topology.kubernetes.io/region" = var.region } : k => v if v != "" },
    var.node_selector,
  )
  vm_input = {
    additionalDisksHash = [for i in range(var.additional_disks) : local.additional_hash]
    rootDiskHash        = local.root_hash
    virtualMachine = {
      cpu               = { cores = var.cores, coreFraction = var.core_fraction }
      ipAddress         = var.allocated_address
      memory            = { size = var.memory }
      nodeSelector      = local.selector
      priorityClassName = var.priority_class
      sshPublicKeyHash  = sha256(jsonencode(var.ssh_public_key))
      tolerations       = var.tolerations
    }
  }
  vm_json = jsonencode(merge(local.vm_input, var.etcd ? { etcDiskHash = local.etcd_hash } : {}))
  vm_hash = substr(sha256(local.vm_json), 0, 6)
}

output "root_disk" { value = { name = "${local.hostname}-${local.root_hash}", json = local.root_json, hash = local.root_hash } }
output "etcd_disk" { value = var.etcd ? "${var.prefix}-${var.group}-kubernetes-data-${var.index}-${local.etcd_hash}" : null }
output "additional_disks" { value = [for i in range(var.additional_disks) : "${var.prefix}-${var.group}-additional-disk-${i}-${var.index}-${local.additional_hash}"] }
output "ip_address" { value = lower("${local.hostname}-${replace(var.ip_address, ".", "-")}") }
output "vm" { value = { name = "${local.hostname}-${local.vm_hash}", secret = "${local.hostname}-cloudinit-${local.vm_hash}", json = local.vm_json, hash = local.vm_hash } }
"#;

/// The names Deckhouse gives node `index` of `group` (`master` or a static group's name) of the
/// configuration `vars`, the parent having allocated `allocated` to its VirtualMachineIPAddress.
/// The instance class is read as Deckhouse's layout reads it (its defaults; tolerations as
/// strings, null when none are given); the zone as it picks it.
fn deckhouse_names_of(
    vars: &Value,
    group: &str,
    index: usize,
    allocated: &str,
) -> std::collections::BTreeMap<String, Value> {
    let pcc = &vars["providerClusterConfiguration"];
    let group_config = if group == "master" {
        &pcc["masterNodeGroup"]
    } else {
        pcc["nodeGroups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == group)
            .unwrap()
    };
    let class = &group_config["instanceClass"];
    let vm = &class["virtualMachine"];
    let cluster_zones: Vec<String> = pcc["zones"]
        .as_array()
        .map(|z| z.iter().map(|z| z.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    let group_zones: Vec<String> = group_config["zones"]
        .as_array()
        .map(|z| z.iter().map(|z| z.as_str().unwrap().to_string()).collect())
        .unwrap_or_else(|| cluster_zones.clone());
    let zones: BTreeSet<String> = group_zones
        .into_iter()
        .filter(|z| cluster_zones.contains(z))
        .collect();
    let zones: Vec<String> = zones.into_iter().collect();
    let zone = if cluster_zones.is_empty() {
        String::new()
    } else {
        zones[index % zones.len()].clone()
    };
    let tolerations = vm.get("tolerations").map(|ts| {
        ts.as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| {
                        let text = v.as_str().map(str::to_string).unwrap_or(v.to_string());
                        (k.clone(), Value::String(text))
                    })
                    .collect::<serde_json::Map<_, _>>()
            })
            .collect::<Vec<_>>()
    });
    let ip = vm["ipAddresses"]
        .get(index)
        .and_then(Value::as_str)
        .unwrap_or("Auto");
    let input = json!({
        "prefix": vars["clusterConfiguration"]["cloud"]["prefix"],
        "group": group,
        "index": index,
        "etcd": group == "master",
        "additional_disks": class["additionalDisks"].as_array().map_or(0, Vec::len),
        "image": class["rootDisk"]["image"],
        "cores": vm["cpu"]["cores"],
        "core_fraction": vm["cpu"].get("coreFraction").cloned().unwrap_or("100%".into()),
        "memory": vm["memory"]["size"],
        "zone": zone,
        "region": pcc.get("region").cloned().unwrap_or("".into()),
        "node_selector": vm.get("nodeSelector").cloned().unwrap_or(json!({})),
        "tolerations": tolerations,
        "priority_class": vm.get("priorityClassName").cloned().unwrap_or(Value::Null),
        "ssh_public_key": pcc["sshPublicKey"],
        "allocated_address": allocated,
        "ip_address": ip,
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.tf"), DECKHOUSE_NAMES).unwrap();
    tofu().apply_outputs(dir.path(), &input).unwrap()
}

/// The names Deckhouse gives the objects of the states' `module`.
fn deckhouse_names(module: &str) -> std::collections::BTreeMap<String, Value> {
    let address = ALLOCATED.iter().find(|a| a.0 == module).unwrap().2;
    let group = if module == "master-node" {
        "master"
    } else {
        "worker"
    };
    deckhouse_names_of(&vars(module), group, 0, address)
}

#[test]
fn dvp_deckhouse_states_name_their_objects_as_deckhouse_derives_them() {
    for module in NODES {
        let state = state(module);
        let names = deckhouse_names(module);
        let manifest = |a: &str| instance(&state, a)["manifest"].clone();
        let root = manifest("module.root-disk.kubernetes_manifest.root-disk");
        assert_eq!(
            root["metadata"]["name"], names["root_disk"]["name"],
            "{module}"
        );
        let annotations = &root["metadata"]["annotations"];
        assert_eq!(
            annotations["last_applied_destructive_root_disk_parameters"],
            names["root_disk"]["json"],
            "{module}"
        );
        assert_eq!(
            annotations["last_applied_destructive_root_disk_parameters_hash"],
            names["root_disk"]["hash"],
            "{module}"
        );
        if module == "master-node" {
            let etcd =
                manifest("module.kubernetes-data-disk.kubernetes_manifest.kubernetes-data-disk");
            assert_eq!(etcd["metadata"]["name"], names["etcd_disk"]);
        }
        let ip = manifest("module.ipv4-address.kubernetes_manifest.ipv4_address[0]");
        assert_eq!(ip["metadata"]["name"], names["ip_address"], "{module}");
        let owner = if module == "master-node" {
            "master"
        } else {
            "static-node"
        };
        let vm = manifest(&format!("module.{owner}.kubernetes_manifest.vm"));
        assert_eq!(vm["metadata"]["name"], names["vm"]["name"], "{module}");
        assert_eq!(
            vm["metadata"]["annotations"]["last_applied_destructive_vm_parameters"],
            names["vm"]["json"],
            "{module}"
        );
        assert_eq!(
            vm["spec"]["provisioning"]["userDataRef"]["name"], names["vm"]["secret"],
            "{module}"
        );
        let secret = instance(
            &state,
            &format!("module.{owner}.kubernetes_secret.cloudinit-secret"),
        );
        assert_eq!(
            secret["metadata"][0]["name"], names["vm"]["secret"],
            "{module}"
        );
        // The ownerReferences name the VM.
        for r in state["resources"].as_array().unwrap() {
            if r["type"] == "kubernetes_owner_references_v1" {
                let refs = &r["instances"][0]["attributes"]["owner_references"][0];
                assert_eq!(refs["name"], names["vm"]["name"], "{module}: {}", r["name"]);
            }
        }
    }
}

#[test]
fn dvp_layout_names_objects_as_deckhouse_derives_them_for_every_hash_input() {
    // The configuration of the dry-run test (static and Auto addresses, tolerations, a node
    // selector, a priority class, an additional disk, a region) with zones: the layout's
    // names and the VM's hashed parameters are the derivation's.
    let mut vars = crate::dvp_plans::offline_vars();
    vars["providerClusterConfiguration"]["zones"] = json!(["zone-b", "zone-a"]);
    let ws = Workspace::copy(&layouts()).unwrap();
    for (render, group, index, allocated) in [
        ("master-manifests", "master", 0, "10.66.10.11"),
        ("master-manifests", "master", 1, "10.66.10.40"),
        ("static-node-manifests", "worker", 1, "10.66.10.41"),
    ] {
        let mut v = vars.clone();
        v["nodeIndex"] = index.into();
        v["allocated_ip_address"] = allocated.into();
        if group != "master" {
            v["nodeGroupName"] = group.into();
        }
        let dir = catalog::shared_module_dir(&ws.root(), "dvp", render);
        let ours = tofu().apply_outputs(&dir, &v).unwrap();
        let names = deckhouse_names_of(&vars, group, index, allocated);
        let case = format!("{group} {index}");
        let disk = |role: &str| ours["disks"][role]["metadata"]["name"].clone();
        assert_eq!(disk("root"), names["root_disk"]["name"], "{case}");
        assert_eq!(
            ours["disks"]
                .get("kubernetes-data")
                .map(|d| d["metadata"]["name"].clone()),
            // tofu leaves a null output out.
            names
                .get("etcd_disk")
                .and_then(Value::as_str)
                .map(Value::from),
            "{case}"
        );
        let additional: Vec<Value> = (0..names["additional_disks"].as_array().unwrap().len())
            .map(|i| disk(&format!("additional-{i}")))
            .collect();
        assert_eq!(Value::from(additional), names["additional_disks"], "{case}");
        assert_eq!(
            ours["ip_address"]["metadata"]["name"], names["ip_address"],
            "{case}"
        );
        let vm = &ours["virtual_machine"];
        assert_eq!(
            vm["metadata"]["annotations"]["last_applied_destructive_vm_parameters"],
            names["vm"]["json"],
            "{case}"
        );
        assert_eq!(vm["metadata"]["name"], names["vm"]["name"], "{case}");
        assert_eq!(
            ours["cloud_init_secret"]["metadata"]["name"], names["vm"]["secret"],
            "{case}"
        );
    }
}
