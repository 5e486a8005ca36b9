//! The DVP configuration table: cluster configurations Deckhouse's schema accepts (every optional
//! field set, then each left out in turn) rendered by tofu from the provider-free manifest modules
//! the layout applies (hashicorp/kubernetes cannot be installed here; the layout modules
//! themselves are planned only against its schema-only stand-in, in `dvp_takeover`), asserting the objects and attributes each field must produce: the
//! `isolated-<prefix>` NetworkPolicy and its ports, region and zone pinning, labels at each
//! level, tolerations with tolerationSeconds, disks and their StorageClasses, static addresses of
//! masters and static nodes. Then configurations the schema refuses, refused naming the field.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{json, Value};
use stratus_layouts_check::catalog;
use stratus_layouts_check::workspace::Workspace;

use crate::common::{assert_refused, fixture, layouts, squash, tofu, with_field};

/// Variables with a kubeconfig the layouts can read (nothing is contacted).
pub(crate) fn offline_vars() -> Value {
    let mut vars = fixture("dvp-standard.tfvars.json");
    vars["providerClusterConfiguration"]["provider"]["kubeconfigDataBase64"] =
        base64::engine::general_purpose::STANDARD
            .encode("clusters:\n- name: p\n  cluster: {server: https://127.0.0.1:1}\n")
            .into();
    vars
}

/// Every optional field of DVPClusterConfiguration set (the fixture leaves a few out).
fn full() -> Value {
    let mut vars = offline_vars();
    for (pointer, value) in [
        ("/zones", json!(["zone-a", "zone-b"])),
        (
            "/masterNodeGroup/zones",
            json!(["zone-c", "zone-b", "zone-a"]),
        ),
        (
            "/masterNodeGroup/instanceClass/etcdDisk/storageClass",
            json!("linstor-fast"),
        ),
        (
            "/masterNodeGroup/instanceClass/additionalDisks/0/storageClass",
            json!("linstor-slow"),
        ),
        (
            "/masterNodeGroup/instanceClass/virtualMachine/bootloader",
            json!("EFIWithSecureBoot"),
        ),
        (
            "/masterNodeGroup/instanceClass/virtualMachine/runPolicy",
            json!("Manual"),
        ),
        (
            "/masterNodeGroup/instanceClass/virtualMachine/liveMigrationPolicy",
            json!("AlwaysSafe"),
        ),
        (
            "/masterNodeGroup/instanceClass/virtualMachine/priorityClassName",
            json!("control-plane"),
        ),
        (
            "/nodeGroups/0/instanceClass/additionalDisks",
            json!([{"size": "5Gi", "storageClass": "linstor-slow"}]),
        ),
        (
            "/nodeGroups/0/instanceClass/rootDisk/storageClass",
            json!("linstor-thin-r1"),
        ),
    ] {
        vars = with_field(vars, pointer, value);
    }
    vars
}

/// `vars` without the field at `pointer` (under `providerClusterConfiguration`).
fn without(vars: &Value, pointer: &str) -> Value {
    let mut v = vars.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v["providerClusterConfiguration"]
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .and_then(|o| o.remove(key))
        .unwrap_or_else(|| panic!("the configuration sets {pointer}"));
    v
}

/// Renders the provider-free manifest module `module` with `vars`: its outputs.
fn render(module: &str, vars: &Value) -> BTreeMap<String, Value> {
    let ws = Workspace::copy(&layouts()).unwrap();
    tofu()
        .apply_outputs(&catalog::shared_module_dir(&ws.root(), "dvp", module), vars)
        .unwrap_or_else(|e| panic!("{module}: {e}"))
}

/// The master (nodeIndex `index`) of `vars`.
fn master(vars: &Value, index: u32) -> BTreeMap<String, Value> {
    let mut v = vars.clone();
    v["nodeIndex"] = index.into();
    render("master-manifests", &v)
}

/// Static node `index` of the group worker.
fn worker(vars: &Value, index: u32) -> BTreeMap<String, Value> {
    let mut v = vars.clone();
    v["nodeGroupName"] = "worker".into();
    v["nodeIndex"] = index.into();
    render("static-node-manifests", &v)
}

#[test]
fn dvp_full_configuration_renders_what_each_field_asks_for() {
    let vars = full();
    let base = render("base-manifests", &vars);
    // networkPolicy Isolated: Deckhouse's isolated-<prefix>, the cluster's VMs among themselves,
    // ingressPorts to everyone.
    let policy = &base["network_policy"];
    assert_eq!(policy["metadata"]["name"], "isolated-tenant-a", "{policy}");
    assert_eq!(policy["metadata"]["namespace"], "tenant-a");
    assert_eq!(
        policy["spec"]["ingress"][1]["ports"],
        json!([{"protocol": "TCP", "port": 22}, {"protocol": "TCP", "port": 6443}])
    );
    assert_eq!(
        base["cloud_discovery_data"]["zones"],
        json!(["zone-a", "zone-b"])
    );

    let m0 = master(&vars, 0);
    let vm = &m0["virtual_machine"];
    let spec = &vm["spec"];
    // region and the master group's zones pin the VM; nodeSelector is kept beside them. The
    // group's zones are, as Deckhouse picks them, those the cluster lists, sorted (zone-c is not).
    assert_eq!(
        spec["nodeSelector"],
        json!({"topology.kubernetes.io/region": "region-a", "topology.kubernetes.io/zone": "zone-a",
               "kubernetes.io/os": "linux"})
    );
    // Labels: instanceClass.additionalLabels, virtualMachine.additionalLabels, additionalVMLabels.
    let labels = &vm["metadata"]["labels"];
    assert_eq!(
        (&labels["tier"], &labels["role"], &labels["team"]),
        (
            &json!("control"),
            &json!("control-plane"),
            &json!("platform")
        ),
        "{labels}"
    );
    // additionalAnnotations beside Deckhouse's record of what the VM's name hashes.
    let annotations = &vm["metadata"]["annotations"];
    assert_eq!(
        annotations["example.com/owner"], "platform",
        "{annotations}"
    );
    let hash = annotations["last_applied_destructive_vm_parameters_hash"]
        .as_str()
        .unwrap();
    assert_eq!(vm["metadata"]["name"], format!("tenant-a-master-0-{hash}"));
    let hashed: Value = serde_json::from_str(
        annotations["last_applied_destructive_vm_parameters"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    // Deckhouse hashes tolerations as strings, the address the parent allocated (not known to a
    // render without a parent: null).
    assert_eq!(
        hashed["virtualMachine"]["tolerations"][1]["tolerationSeconds"], "300",
        "{hashed}"
    );
    assert_eq!(
        hashed["virtualMachine"]["ipAddress"],
        Value::Null,
        "{hashed}"
    );
    assert_eq!(
        spec["tolerations"][1],
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300})
    );
    assert_eq!(
        (
            &spec["bootloader"],
            &spec["runPolicy"],
            &spec["liveMigrationPolicy"],
            &spec["priorityClassName"]
        ),
        (
            &json!("EFIWithSecureBoot"),
            &json!("Manual"),
            &json!("AlwaysSafe"),
            &json!("control-plane")
        )
    );
    assert_eq!(spec["cpu"], json!({"cores": 4, "coreFraction": "100%"}));
    assert_eq!(spec["memory"]["size"], "8Gi");
    // Disks: root from the image in its class, etcd and additional in theirs.
    let disks = &m0["disks"];
    let root = &disks["root"]["spec"];
    assert_eq!(
        root["persistentVolumeClaim"],
        json!({"size": "50Gi", "storageClassName": "linstor-thin-r2"})
    );
    assert_eq!(
        root["dataSource"]["objectRef"],
        json!({"kind": "ClusterVirtualImage", "name": "ubuntu-24-04"})
    );
    assert_eq!(
        disks["kubernetes-data"]["spec"]["persistentVolumeClaim"],
        json!({"size": "15Gi", "storageClassName": "linstor-fast"})
    );
    assert_eq!(
        disks["additional-0"]["spec"]["persistentVolumeClaim"],
        json!({"size": "20Gi", "storageClassName": "linstor-slow"})
    );
    // ipAddresses by index: the first master's static, the second's Auto; zones by index too.
    assert_eq!(
        m0["ip_address"]["spec"],
        json!({"type": "Static", "staticIP": "10.66.10.11"})
    );
    let m1 = master(&vars, 1);
    assert_eq!(
        m1["ip_address"]["spec"],
        json!({"type": "Auto", "staticIP": ""})
    );
    assert_eq!(
        m1["virtual_machine"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"],
        "zone-b"
    );

    // The static node: its group's address, zone, class, disks; no etcd disk.
    let w0 = worker(&vars, 0);
    assert_eq!(
        w0["ip_address"]["spec"],
        json!({"type": "Static", "staticIP": "10.66.10.21"})
    );
    let wspec = &w0["virtual_machine"]["spec"];
    assert_eq!(
        wspec["nodeSelector"],
        json!({"topology.kubernetes.io/region": "region-a", "topology.kubernetes.io/zone": "zone-b"})
    );
    assert_eq!(
        (
            &wspec["cpu"]["coreFraction"],
            &wspec["bootloader"],
            &wspec["runPolicy"],
            &wspec["priorityClassName"]
        ),
        (
            &json!("50%"),
            &json!("BIOS"),
            &json!("AlwaysOn"),
            &json!("tenant-nodes")
        )
    );
    let wdisks = w0["disks"].as_object().unwrap();
    assert_eq!(
        wdisks.keys().collect::<Vec<_>>(),
        ["additional-0", "root"],
        "{wdisks:?}"
    );
    assert_eq!(
        wdisks["root"]["spec"]["persistentVolumeClaim"]["storageClassName"],
        "linstor-thin-r1"
    );
    assert_eq!(
        w0["virtual_machine"]["metadata"]["labels"]["dvp.deckhouse.io/node-group"],
        "worker"
    );
    let w1 = worker(&vars, 1);
    assert_eq!(
        w1["ip_address"]["spec"],
        json!({"type": "Auto", "staticIP": ""})
    );
}

#[test]
fn dvp_each_optional_field_left_out_takes_deckhouse_default() {
    let vars = full();
    const VM: &str = "/masterNodeGroup/instanceClass/virtualMachine";

    // region: no region pinning.
    let m0 = master(&without(&vars, "/region"), 0);
    let selector = &m0["virtual_machine"]["spec"]["nodeSelector"];
    assert!(
        selector.get("topology.kubernetes.io/region").is_none(),
        "{selector}"
    );
    // etcdDisk.storageClass and rootDisk.storageClass: the parent's default class.
    let m0 = master(
        &without(
            &vars,
            "/masterNodeGroup/instanceClass/etcdDisk/storageClass",
        ),
        0,
    );
    assert_eq!(
        m0["disks"]["kubernetes-data"]["spec"]["persistentVolumeClaim"],
        json!({"size": "15Gi"})
    );
    let m0 = master(
        &without(
            &vars,
            "/masterNodeGroup/instanceClass/rootDisk/storageClass",
        ),
        0,
    );
    assert_eq!(
        m0["disks"]["root"]["spec"]["persistentVolumeClaim"],
        json!({"size": "50Gi"})
    );
    // instanceClass.additionalLabels, virtualMachine.additionalLabels, additionalVMLabels: none
    // of their labels.
    for (pointer, label) in [
        ("/masterNodeGroup/instanceClass/additionalLabels", "tier"),
        (&format!("{VM}/additionalLabels") as &str, "role"),
        ("/provider/additionalVMLabels", "team"),
    ] {
        let m0 = master(&without(&vars, pointer), 0);
        let labels = &m0["virtual_machine"]["metadata"]["labels"];
        assert!(labels.get(label).is_none(), "{pointer}: {labels}");
        assert_eq!(labels["dvp.deckhouse.io/hostname"], "tenant-a-master-0");
    }
    // tolerations, priorityClassName, additionalDisks, ipAddresses: none, Auto. No tolerations
    // are rendered (nor hashed: null) as in Deckhouse's layout.
    let m0 = master(&without(&vars, &format!("{VM}/tolerations")), 0);
    let vm = &m0["virtual_machine"];
    assert!(vm["spec"].get("tolerations").is_none(), "{vm}");
    assert!(
        vm["metadata"]["annotations"]["last_applied_destructive_vm_parameters"]
            .as_str()
            .unwrap()
            .contains(r#""tolerations":null"#),
        "{vm}"
    );
    let m0 = master(&without(&vars, &format!("{VM}/priorityClassName")), 0);
    assert!(m0["virtual_machine"]["spec"]
        .get("priorityClassName")
        .is_none());
    let m0 = master(
        &without(&vars, "/masterNodeGroup/instanceClass/additionalDisks"),
        0,
    );
    assert_eq!(
        m0["disks"].as_object().unwrap().len(),
        2,
        "root and etcd: {}",
        m0["disks"]
    );
    let m0 = master(&without(&vars, &format!("{VM}/ipAddresses")), 0);
    assert_eq!(
        m0["ip_address"]["spec"],
        json!({"type": "Auto", "staticIP": ""})
    );
    let w0 = worker(
        &without(
            &vars,
            "/nodeGroups/0/instanceClass/virtualMachine/ipAddresses",
        ),
        0,
    );
    assert_eq!(
        w0["ip_address"]["spec"],
        json!({"type": "Auto", "staticIP": ""})
    );
    // coreFraction, bootloader, runPolicy, liveMigrationPolicy: Deckhouse's defaults.
    let mut bare = vars.clone();
    for field in [
        "cpu/coreFraction",
        "bootloader",
        "runPolicy",
        "liveMigrationPolicy",
    ] {
        bare = without(&bare, &format!("{VM}/{field}"));
    }
    let spec = &master(&bare, 0)["virtual_machine"]["spec"];
    assert_eq!(
        (
            &spec["cpu"]["coreFraction"],
            &spec["bootloader"],
            &spec["runPolicy"],
            &spec["liveMigrationPolicy"]
        ),
        (
            &json!("100%"),
            &json!("EFI"),
            &json!("AlwaysOnUnlessStoppedManually"),
            &json!("PreferForced")
        )
    );
    // masterNodeGroup.zones: the cluster's zones; zones: the discovery data says default.
    let m0 = master(&without(&vars, "/masterNodeGroup/zones"), 0);
    assert_eq!(
        m0["virtual_machine"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"],
        "zone-a"
    );
    let base = render("base-manifests", &without(&vars, "/zones"));
    assert_eq!(base["cloud_discovery_data"]["zones"], json!(["default"]));
    // networkPolicy: Isolated; ingressPorts: 22.
    let base = render(
        "base-manifests",
        &without(
            &without(&vars, "/provider/networkPolicy"),
            "/provider/ingressPorts",
        ),
    );
    assert_eq!(
        base["network_policy"]["spec"]["ingress"][1]["ports"],
        json!([{"protocol": "TCP", "port": 22}])
    );
    // networkPolicy None: no policy (a null output is left out of `tofu output`).
    let base = render(
        "base-manifests",
        &with_field(vars.clone(), "/provider/networkPolicy", json!("None")),
    );
    assert!(
        base.get("network_policy").is_none_or(Value::is_null),
        "{base:?}"
    );
}

/// Configurations Deckhouse's schema refuses, one bad field at a time, through a manifest module
/// (its cluster-config checks them): each refusal names the field, an unknown field at every level
/// the schema fixes and a bad value alike.
#[test]
fn dvp_configuration_deckhouse_refuses_is_refused_naming_the_field() {
    const VM: &str = "/masterNodeGroup/instanceClass/virtualMachine";
    const WORKER: &str = "/nodeGroups/0/instanceClass";
    let unknown_fields: Vec<(String, Value, &str)> = vec![
        ("/regions".into(), json!("x"), "regions"),
        (
            "/provider/kubeconfig".into(),
            json!("x"),
            "provider.kubeconfig",
        ),
        // Masters have no nodeTemplate in Deckhouse's schema.
        (
            "/masterNodeGroup/nodeTemplate".into(),
            json!({}),
            "masterNodeGroup.nodeTemplate",
        ),
        (
            "/masterNodeGroup/instanceClass/etcdDisk/type".into(),
            json!("x"),
            "masterNodeGroup.instanceClass.etcdDisk.type",
        ),
        (
            format!("{VM}/cores"),
            json!(2),
            "masterNodeGroup.instanceClass.virtualMachine.cores",
        ),
        (
            format!("{VM}/cpu/sockets"),
            json!(1),
            "masterNodeGroup.instanceClass.virtualMachine.cpu.sockets",
        ),
        (
            format!("{VM}/memory/limit"),
            json!("1Gi"),
            "masterNodeGroup.instanceClass.virtualMachine.memory.limit",
        ),
        (
            format!("{VM}/tolerations/1/seconds"),
            json!(300),
            "masterNodeGroup.instanceClass.virtualMachine.tolerations[1].seconds",
        ),
        (
            "/masterNodeGroup/instanceClass/rootDisk/image/namespace".into(),
            json!("x"),
            "masterNodeGroup.instanceClass.rootDisk.image.namespace",
        ),
        (
            "/masterNodeGroup/instanceClass/additionalDisks/0/type".into(),
            json!("x"),
            "masterNodeGroup.instanceClass.additionalDisks[0].type",
        ),
        // Only masters have an etcd disk and instance-class labels.
        (
            format!("{WORKER}/etcdDisk"),
            json!({"size": "1Gi"}),
            "nodeGroups[0].instanceClass.etcdDisk",
        ),
        (
            format!("{WORKER}/additionalLabels"),
            json!({}),
            "nodeGroups[0].instanceClass.additionalLabels",
        ),
        (
            format!("{WORKER}/virtualMachine/ipAddress"),
            json!("10.66.10.21"),
            "nodeGroups[0].instanceClass.virtualMachine.ipAddress",
        ),
        (
            "/nodeGroups/0/nodeTemplate/taints".into(),
            json!([{"key": "a", "effect": "NoSchedule", "operator": "Exists"}]),
            "nodeGroups[0].nodeTemplate.taints[0].operator",
        ),
        (
            "/nodeGroups/0/minPerZone".into(),
            json!(1),
            "nodeGroups[0].minPerZone",
        ),
    ];
    let messages: Vec<String> = unknown_fields
        .iter()
        .map(|(_, _, path)| {
            format!("Deckhouse's DVPClusterConfiguration has no field providerClusterConfiguration.{path}:")
        })
        .collect();
    let mut cases: Vec<(&str, Value, &str)> = unknown_fields
        .iter()
        .zip(&messages)
        .map(|((pointer, value, _), message)| (pointer.as_str(), value.clone(), message.as_str()))
        .collect();
    let seconds = format!("{VM}/tolerations/0/tolerationSeconds");
    let bootloader = format!("{VM}/bootloader");
    let ips = format!("{VM}/ipAddresses");
    let worker_ips = format!("{WORKER}/virtualMachine/ipAddresses");
    let cores = format!("{WORKER}/virtualMachine/cpu/cores");
    cases.extend([
        (
            seconds.as_str(),
            json!(60),
            "tolerationSeconds a whole number given only with effect NoExecute",
        ),
        ("/region", json!(""), "providerClusterConfiguration.region, when set, must not be empty"),
        (
            cores.as_str(),
            json!(0),
            "instanceClass.virtualMachine.cpu.cores must be a whole number of at least 1",
        ),
        (bootloader.as_str(), json!("UEFI"), "bootloader must be BIOS, EFI or EFIWithSecureBoot"),
        (
            "/masterNodeGroup/instanceClass/etcdDisk/storageClass",
            json!(""),
            "its storageClass, when set, must not be empty",
        ),
        (
            "/masterNodeGroup/instanceClass/rootDisk/image/kind",
            json!("DataVolume"),
            "image.kind must be ClusterVirtualImage, VirtualImage or VirtualDisk",
        ),
        (
            ips.as_str(),
            json!(["10.66.10.300"]),
            "masterNodeGroup.instanceClass.virtualMachine.ipAddresses must hold IPv4 addresses or Auto",
        ),
        (
            worker_ips.as_str(),
            json!(["ten"]),
            "nodeGroups[].instanceClass.virtualMachine.ipAddresses must hold IPv4 addresses or Auto",
        ),
        ("/provider/networkPolicy", json!("Open"), "networkPolicy must be Isolated or None"),
    ]);
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::shared_module_dir(&ws.root(), "dvp", "master-manifests");
    assert_refused(&dir, &offline_vars(), &cases);
}

#[test]
fn dvp_node_index_beyond_the_replicas_is_refused() {
    let mut vars = offline_vars();
    vars["nodeIndex"] = 3.into();
    let ws = Workspace::copy(&layouts()).unwrap();
    let output = tofu()
        .apply_failure(
            &catalog::shared_module_dir(&ws.root(), "dvp", "master-manifests"),
            &vars,
        )
        .unwrap();
    assert!(
        squash(&output).contains("nodeIndex must be below the replicas of the node's group"),
        "{output}"
    );
}
