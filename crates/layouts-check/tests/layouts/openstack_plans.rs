//! The OpenStack configuration table: cluster configurations Deckhouse's schema accepts (every
//! optional field set, then each left out in turn) planned from nothing with the real provider
//! (offline; the data sources read the loopback stand-in of [`crate::openstack_api`]), asserting
//! the resources and attributes each field must produce: the allow list on SSH and ICMP, the
//! NodePort rule, the internal network's CIDR and DNS servers, tags, the bastion's disk and tags,
//! the masters' etcd and root volumes and server group, the static node's ports, security,
//! floating IPs, zone, volume type and config drive.

use serde_json::{json, Value};
use stratus_layouts_check::catalog;
use stratus_layouts_check::takeover::{plan_module, PlanSummary};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{fixture, layouts, tofu};
use crate::openstack_api;

const RULES: &str = "module.base.module.network_security.openstack_networking_secgroup_rule_v2";

/// Every optional field of a Standard configuration set.
pub(crate) fn full(auth_url: &str) -> Value {
    let mut vars = fixture("deckhouse-state/openstack-standard/static-node.tfvars.json");
    vars["providerClusterConfiguration"] = json!({
        "layout": "Standard",
        "sshPublicKey": vars["providerClusterConfiguration"]["sshPublicKey"],
        "sshAllowList": ["203.0.113.0/24"],
        "tags": {"team": "platform"},
        "zones": ["nova", "zone-b"],
        "provider": {"authURL": auth_url, "caCert": "", "domainName": "Default", "tenantName": "tenant-a",
            "username": "deckhouse", "password": "x", "region": "RegionOne"},
        "masterNodeGroup": {"replicas": 1, "instanceClass": {"flavorName": "m1.large", "imageName": "ubuntu-24-04",
            "rootDiskSize": 40, "etcdDiskSizeGb": 20, "additionalSecurityGroups": ["extra"],
            "additionalTags": {"role": "master"}},
            "volumeTypeMap": {"nova": "ceph-ssd"}, "serverGroup": {"policy": "AntiAffinity"}},
        "nodeGroups": [{"name": "worker", "replicas": 2, "zones": ["zone-b"], "volumeTypeMap": {"zone-b": "fast"},
            "instanceClass": {"flavorName": "m1.medium", "imageName": "ubuntu-24-04", "rootDiskSize": 30,
                "configDrive": true, "mainNetwork": "c1", "additionalNetworks": ["public"],
                "networksWithSecurityDisabled": ["public"], "floatingIPPools": ["public"],
                "additionalSecurityGroups": ["extra"], "additionalTags": {"role": "worker"}}}],
        "standard": {"internalNetworkCIDR": "192.168.199.0/24", "internalNetworkDNSServers": ["192.0.2.53"],
            "internalNetworkSecurity": true, "externalNetworkName": "public",
            "bastion": {"zone": "nova", "volumeType": "ceph-ssd", "instanceClass": {"flavorName": "m1.small",
                "imageName": "ubuntu-24-04", "rootDiskSize": 60, "additionalTags": {"bastion": "yes"}}}}
    });
    vars["nodeIndex"] = 0.into();
    vars
}

/// `vars` without the field at `path` (object keys).
fn without(vars: &Value, path: &[&str]) -> Value {
    let mut v = vars.clone();
    let (last, parents) = path.split_last().unwrap();
    let mut at = &mut v["providerClusterConfiguration"];
    for p in parents {
        at = &mut at[*p];
    }
    at.as_object_mut().unwrap().remove(*last);
    v
}

async fn plan(vars: &Value, module: &str) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", "standard", module);
    let (vars, tofu, module) = (vars.clone(), tofu(), module.to_string());
    tokio::task::spawn_blocking(move || {
        let summary = plan_module(&tofu, &dir, &vars);
        drop(ws);
        summary.unwrap_or_else(|e| panic!("{module}: {e}"))
    })
    .await
    .unwrap()
}

fn after<'a>(summary: &'a PlanSummary, address: &str) -> &'a Value {
    &summary
        .change(address)
        .unwrap_or_else(|| panic!("{address} is not planned:\n{summary}"))
        .after
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_full_configuration_plans_what_each_field_asks_for() {
    let api = openstack_api::start().await;
    let vars = full(&api.auth_url);

    let base = plan(&vars, "base-infrastructure").await;
    // sshAllowList on SSH and ICMP; NodePorts open to load balancers from anywhere.
    assert_eq!(
        after(&base, &format!("{RULES}.allow_ssh[0]"))["remote_ip_prefix"],
        "203.0.113.0/24"
    );
    assert_eq!(
        after(&base, &format!("{RULES}.allow_icmp[0]"))["remote_ip_prefix"],
        "203.0.113.0/24"
    );
    let node_ports = after(&base, &format!("{RULES}.allow_node_ports[0]"));
    assert_eq!(
        (&node_ports["port_range_min"], &node_ports["port_range_max"]),
        (&json!(30000), &json!(32767))
    );
    // standard: the internal network, its DNS servers; tags on the network.
    let subnet = after(&base, "openstack_networking_subnet_v2.internal");
    assert_eq!(subnet["cidr"], "192.168.199.0/24");
    assert_eq!(subnet["dns_nameservers"], json!(["192.0.2.53"]));
    let network = after(&base, "openstack_networking_network_v2.internal");
    assert!(
        network["tags"]
            .as_array()
            .unwrap()
            .contains(&json!("team=platform")),
        "{network}"
    );
    // The bastion: its zone, volume type and size, tags and the instance class's additionalTags.
    let volume = after(&base, "openstack_blockstorage_volume_v3.root[0]");
    assert_eq!(
        (
            &volume["size"],
            &volume["volume_type"],
            &volume["availability_zone"]
        ),
        (&json!(60), &json!("ceph-ssd"), &json!("nova"))
    );
    let bastion = after(&base, "openstack_compute_instance_v2.bastion[0]");
    assert_eq!(bastion["flavor_name"], "m1.small");
    assert_eq!(
        bastion["metadata"],
        json!({"team": "platform", "bastion": "yes"})
    );
    assert!(base
        .change("openstack_compute_floatingip_v2.bastion[0]")
        .is_some());

    let master = plan(&vars, "master-node").await;
    let etcd = after(
        &master,
        "module.master.openstack_blockstorage_volume_v3.kubernetes_data",
    );
    assert_eq!(
        (&etcd["size"], &etcd["volume_type"]),
        (&json!(20), &json!("ceph-ssd"))
    );
    assert_eq!(
        after(
            &master,
            "module.master.openstack_blockstorage_volume_v3.master[0]"
        )["size"],
        40
    );
    let server = after(
        &master,
        "module.master.openstack_compute_instance_v2.master",
    );
    assert_eq!(
        (&server["metadata"]["team"], &server["metadata"]["role"]),
        (&json!("platform"), &json!("master")),
        "tags and the instance class's additionalTags: {server}"
    );
    // serverGroup AntiAffinity without a shared group: module.master creates one.
    assert!(master
        .change("module.master.openstack_compute_servergroup_v2.master[0]")
        .is_some());
    // additionalSecurityGroups: the cluster's group and the extra one are looked up by name (the
    // stand-in answers one ID for every name, so the port's set holds one).
    let port = after(
        &master,
        "openstack_networking_port_v2.master_internal_with_security[0]",
    );
    assert_eq!(
        port["security_group_ids"].as_array().unwrap().len(),
        1,
        "{port}"
    );
    // With a bastion the master gets no floating IP.
    assert!(master
        .instances("module.master.openstack_compute_floatingip_v2.master")
        .is_empty());

    let mut node_vars = vars.clone();
    node_vars["nodeGroupName"] = "worker".into();
    let node = plan(&node_vars, "static-node").await;
    // mainNetwork filtered (the pod network allowed), additionalNetworks unfiltered where
    // networksWithSecurityDisabled says so.
    let main = after(&node, "module.node.openstack_networking_port_v2.port[0]");
    assert_eq!(
        main["allowed_address_pairs"][0]["ip_address"],
        "10.111.0.0/16"
    );
    let public = after(&node, "module.node.openstack_networking_port_v2.port[1]");
    assert_eq!(
        main["security_group_ids"].as_array().map(Vec::len),
        Some(1),
        "{main}"
    );
    assert!(
        public["security_group_ids"]
            .as_array()
            .is_none_or(|ids| ids.is_empty()),
        "{public}"
    );
    assert_eq!(
        after(
            &node,
            "module.node.openstack_compute_floatingip_v2.floating_ip[0]"
        )["pool"],
        "public"
    );
    // zones and volumeTypeMap: the group's zone and its volume type; configDrive; tags.
    let volume = after(
        &node,
        "module.node.openstack_blockstorage_volume_v3.volume[0]",
    );
    assert_eq!(
        (
            &volume["availability_zone"],
            &volume["volume_type"],
            &volume["size"]
        ),
        (&json!("zone-b"), &json!("fast"), &json!(30))
    );
    let server = after(&node, "module.node.openstack_compute_instance_v2.node");
    assert_eq!(server["config_drive"], true);
    assert_eq!(
        (&server["metadata"]["team"], &server["metadata"]["role"]),
        (&json!("platform"), &json!("worker")),
        "{server}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_each_optional_field_left_out_takes_deckhouse_default() {
    let api = openstack_api::start().await;
    let vars = full(&api.auth_url);

    // sshAllowList: the world.
    let base = plan(&without(&vars, &["sshAllowList"]), "base-infrastructure").await;
    assert_eq!(
        after(&base, &format!("{RULES}.allow_ssh[0]"))["remote_ip_prefix"],
        format!("{}/0", std::net::Ipv4Addr::UNSPECIFIED)
    );
    // bastion: none, and the master gets a floating IP from the external network.
    let no_bastion = without(&vars, &["standard", "bastion"]);
    let base = plan(&no_bastion, "base-infrastructure").await;
    assert!(base
        .instances("openstack_compute_instance_v2.bastion")
        .is_empty());
    let master = plan(&no_bastion, "master-node").await;
    assert_eq!(
        after(
            &master,
            "module.master.openstack_compute_floatingip_v2.master[0]"
        )["pool"],
        "public"
    );
    // etcdDiskSizeGb: 10; rootDiskSize: the flavor's disk; serverGroup: none.
    let master = plan(
        &without(
            &vars,
            &["masterNodeGroup", "instanceClass", "etcdDiskSizeGb"],
        ),
        "master-node",
    )
    .await;
    assert_eq!(
        after(
            &master,
            "module.master.openstack_blockstorage_volume_v3.kubernetes_data"
        )["size"],
        10
    );
    let master = plan(
        &without(&vars, &["masterNodeGroup", "instanceClass", "rootDiskSize"]),
        "master-node",
    )
    .await;
    assert!(master
        .instances("module.master.openstack_blockstorage_volume_v3.master")
        .is_empty());
    let master = plan(
        &without(&vars, &["masterNodeGroup", "serverGroup"]),
        "master-node",
    )
    .await;
    assert!(master
        .instances("module.master.openstack_compute_servergroup_v2.master")
        .is_empty());
    // internalNetworkSecurity left out is true: the group exists.
    let base = plan(
        &without(&vars, &["standard", "internalNetworkSecurity"]),
        "base-infrastructure",
    )
    .await;
    assert!(base
        .change("module.base.module.network_security.openstack_networking_secgroup_v2.kube[0]")
        .is_some());
    // tags: none on the master.
    let master = plan(&without(&vars, &["tags"]), "master-node").await;
    let server = after(
        &master,
        "module.master.openstack_compute_instance_v2.master",
    );
    let metadata = &server["metadata"];
    assert!(
        metadata.get("team").is_none() && metadata["role"] == "master",
        "{metadata}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_internal_network_security_off_filters_nothing() {
    let api = openstack_api::start().await;
    let mut vars = full(&api.auth_url);
    vars["providerClusterConfiguration"]["standard"]["internalNetworkSecurity"] = false.into();
    let base = plan(&vars, "base-infrastructure").await;
    assert!(base
        .instances("module.base.module.network_security.openstack_networking_secgroup_v2.kube")
        .is_empty());
    let master = plan(&vars, "master-node").await;
    assert!(master
        .change("openstack_networking_port_v2.master_internal_without_security[0]")
        .is_some());
}
