//! Deckhouse's OpenStack discovery-data schema (test data written from the reference facts) held
//! against the documents each layout's base-infrastructure outputs, in the shapes its `tofu
//! test` pins key by key: each is valid, and the keys Stratus used to add are refused by name.

use serde_json::json;
use stratus_layouts_check::schema::violations;

use crate::common::fixture;

fn doc(layout: &str) -> serde_json::Value {
    let mut d = json!({
        "apiVersion": "deckhouse.io/v1", "kind": "OpenStackCloudDiscoveryData", "layout": layout,
        "internalNetworkNames": ["c1"], "externalNetworkNames": ["public"],
        "podNetworkMode": "DirectRoutingWithPortSecurityEnabled", "zones": ["nova", "zone-b"],
        "instances": {"sshKeyPairName": "c1", "imageName": "ubuntu-24-04", "mainNetwork": "c1"},
    });
    match layout {
        "Standard" => {
            d["instances"]["securityGroups"] = json!(["c1"]);
            d["loadBalancer"] = json!({"subnetID": "s", "floatingNetworkID": "f"});
        }
        "StandardWithNoRouter" => {
            d["instances"]["securityGroups"] = json!(["c1"]);
            d["instances"]["additionalNetworks"] = json!(["c1"]);
        }
        "SimpleWithInternalNetwork" => d["loadBalancer"] = json!({"subnetID": "s"}),
        _ => {}
    }
    d
}

#[test]
fn every_layouts_discovery_data_is_valid_and_old_extra_keys_are_refused() {
    let schema = fixture("deckhouse/openstack-cloud-discovery-data.schema.json");
    for layout in [
        "Standard",
        "StandardWithNoRouter",
        "Simple",
        "SimpleWithInternalNetwork",
    ] {
        let problems = violations(&schema, &doc(layout));
        assert!(problems.is_empty(), "{layout}: {problems:#?}");
    }
    let mut dhcp = doc("StandardWithNoRouter");
    dhcp["externalNetworkDHCP"] = false.into();
    assert!(violations(&schema, &dhcp)
        .iter()
        .any(|p| p == "$.externalNetworkDHCP: is not allowed"));
    let mut groups = doc("Simple");
    groups["instances"]["securityGroups"] = json!(["c1"]);
    let problems = violations(&schema, &groups);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("$.instances.securityGroups: is not allowed")),
        "{problems:#?}"
    );
    let mut empty = doc("SimpleWithInternalNetwork");
    empty["loadBalancer"]["floatingNetworkID"] = "".into();
    assert!(!violations(&schema, &empty).is_empty());
}
