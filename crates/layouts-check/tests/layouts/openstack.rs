//! The OpenStack layouts with the real provider (terraform-provider-openstack v1.54.1 from a
//! filesystem mirror, no network): offline `init`, `validate` of every layout module (and a
//! failure when a required argument is removed), `tofu test` with a mocked provider, and the
//! configurations Deckhouse's schema refuses, refused naming the field.

use std::path::PathBuf;

use stratus_layouts_check::catalog::{self, CLOUDS, LAYOUT_MODULES};
use stratus_layouts_check::workspace::Workspace;

use serde_json::{json, Value};

use crate::common::{assert_refused, layouts, squash, tofu};

fn openstack_modules(root: &std::path::Path) -> Vec<PathBuf> {
    let spec = CLOUDS.iter().find(|c| c.cloud == "openstack").unwrap();
    spec.layouts
        .iter()
        .flat_map(|(layout, _)| {
            LAYOUT_MODULES
                .iter()
                .map(move |m| catalog::layout_module_dir(root, "openstack", layout, m))
        })
        .collect()
}

#[test]
fn openstack_layout_modules_validate_with_the_real_provider() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let tofu = tofu();
    let modules = openstack_modules(&ws.root());
    assert_eq!(modules.len(), 12);
    for dir in modules {
        tofu.init(&dir).unwrap();
        let lock = std::fs::read_to_string(dir.join(".terraform.lock.hcl")).unwrap();
        assert!(
            lock.contains("terraform-provider-openstack/openstack") && lock.contains("1.54.1"),
            "{}: {lock}",
            dir.display()
        );
        let validation = tofu.validate(&dir).unwrap();
        let errors: Vec<String> = validation
            .diagnostics
            .iter()
            .filter(|d| d.severity == "error")
            .map(|d| format!("{}: {}", d.summary, d.detail))
            .collect();
        assert!(validation.valid, "{}: {errors:#?}", dir.display());
    }
}

#[test]
fn openstack_validate_fails_when_a_required_argument_is_removed() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let master = catalog::shared_module_dir(&ws.root(), "openstack", "master").join("main.tf");
    let text = std::fs::read_to_string(&master).unwrap();
    let broken = text.replacen("  size                 = var.etcd_disk_size_gb\n", "", 1);
    assert_ne!(
        text, broken,
        "the etcd volume's size argument moved; update this test"
    );
    std::fs::write(&master, broken).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", "standard", "master-node");
    let tofu = tofu();
    tofu.init(&dir).unwrap();
    let validation = tofu.validate(&dir).unwrap();
    assert!(
        !validation.valid && validation.error_count >= 1,
        "{validation:?}"
    );
    assert!(
        validation
            .diagnostics
            .iter()
            .any(|d| d.summary == "Missing required argument" && d.detail.contains("\"size\"")),
        "{validation:#?}"
    );
}

#[test]
fn openstack_init_installs_nothing_outside_the_mirror() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", "simple", "base-infrastructure");
    std::fs::write(
        dir.join("extra.tf"),
        "resource \"null_resource\" \"extra\" {}\n",
    )
    .unwrap();
    let run = tofu()
        .run(
            &dir,
            &["init", "-backend=false", "-input=false", "-no-color"],
        )
        .unwrap();
    assert!(!run.success, "init must fail: {}", run.stdout);
    let output = squash(&format!("{}{}", run.stdout, run.stderr));
    assert!(output.contains("hashicorp/null"), "{output}");
}

#[test]
fn openstack_tofu_tests_pass_for_every_layout_module() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let tofu = tofu();
    let mut runs = 0;
    for dir in openstack_modules(&ws.root()) {
        tofu.init(&dir).unwrap();
        let run = tofu.test(&dir).unwrap();
        let output = format!("{}{}", run.stdout, run.stderr);
        assert!(run.success, "{}:\n{output}", dir.display());
        let summary = output
            .lines()
            .find(|l| l.starts_with("Success!"))
            .unwrap_or_default();
        let passed: usize = summary
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(passed >= 1, "{}: {summary}", dir.display());
        runs += passed;
    }
    eprintln!("tofu test: {runs} runs passed in 12 OpenStack layout modules");
    assert!(runs >= 12);
}

#[test]
fn openstack_tofu_test_fails_when_a_layout_creates_something_else() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let security =
        catalog::shared_module_dir(&ws.root(), "openstack", "network-security").join("main.tf");
    let text = std::fs::read_to_string(&security).unwrap();
    let broken = text.replace("port_range_min    = 22\n", "port_range_min    = 2222\n");
    assert_ne!(text, broken, "the SSH rule moved; update this test");
    std::fs::write(&security, broken).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", "simple", "base-infrastructure");
    let tofu = tofu();
    tofu.init(&dir).unwrap();
    let run = tofu.test(&dir).unwrap();
    let output = squash(&format!("{}{}", run.stdout, run.stderr));
    assert!(!run.success, "{output}");
    assert!(
        output.contains("SSH must be open to 203.0.113.0/24"),
        "{output}"
    );
}

/// Configurations Deckhouse's schema refuses, one bad field at a time: each refusal names the
/// field, an unknown field at every level the schema fixes and a bad value alike.
#[test]
fn openstack_configuration_deckhouse_refuses_is_refused_naming_the_field() {
    let unknown_fields: [(&str, Value, &str); 15] = [
        ("/sshAllowlist", json!([]), "sshAllowlist"),
        ("/provider/projectName", json!("x"), "provider.projectName"),
        (
            "/masterNodeGroup/instanceType",
            json!("x"),
            "masterNodeGroup.instanceType",
        ),
        // Only node groups choose their networks.
        (
            "/masterNodeGroup/instanceClass/mainNetwork",
            json!("x"),
            "masterNodeGroup.instanceClass.mainNetwork",
        ),
        (
            "/masterNodeGroup/serverGroup/name",
            json!("x"),
            "masterNodeGroup.serverGroup.name",
        ),
        (
            "/masterNodeGroup/serverGroup/manuallyManaged",
            json!({"id": "x", "name": "x"}),
            "masterNodeGroup.serverGroup.manuallyManaged.name",
        ),
        (
            "/nodeGroups/0/rootDiskSize",
            json!(30),
            "nodeGroups[0].rootDiskSize",
        ),
        (
            "/nodeGroups/0/instanceClass/etcdDiskSizeGb",
            json!(10),
            "nodeGroups[0].instanceClass.etcdDiskSizeGb",
        ),
        (
            "/nodeGroups/0/nodeTemplate",
            json!({"labels": {}, "taint": []}),
            "nodeGroups[0].nodeTemplate.taint",
        ),
        (
            "/standard/externalNetworkDHCP",
            json!(true),
            "standard.externalNetworkDHCP",
        ),
        (
            "/standard/bastion/volumeSize",
            json!(50),
            "standard.bastion.volumeSize",
        ),
        (
            "/standard/bastion/instanceClass/additionalSecurityGroups",
            json!([]),
            "standard.bastion.instanceClass.additionalSecurityGroups",
        ),
        (
            "/standardWithNoRouter",
            json!({"internalNetworkCIDR": "192.168.0.0/24", "externalNetworkName": "public", "internalNetworkDNSServers": []}),
            "standardWithNoRouter.internalNetworkDNSServers",
        ),
        (
            "/simple",
            json!({"externalNetworkName": "public", "internalSubnetName": "x"}),
            "simple.internalSubnetName",
        ),
        (
            "/simpleWithInternalNetwork",
            json!({"internalSubnetName": "x", "internalNetworkCIDR": "192.168.0.0/24"}),
            "simpleWithInternalNetwork.internalNetworkCIDR",
        ),
    ];
    let messages: Vec<String> = unknown_fields
        .iter()
        .map(|(_, _, path)| {
            format!("Deckhouse's OpenStackClusterConfiguration has no field providerClusterConfiguration.{path}:")
        })
        .collect();
    let mut cases: Vec<(&str, Value, &str)> = unknown_fields
        .iter()
        .zip(&messages)
        .map(|((pointer, value, _), message)| (*pointer, value.clone(), message.as_str()))
        .collect();
    cases.extend([
        (
            "/layout",
            json!("StandardWithNoRouter"),
            "the section of the chosen layout is missing",
        ),
        (
            "/simple",
            json!({"externalNetworkName": "public", "podNetworkMode": "Geneve"}),
            "providerClusterConfiguration.simple.podNetworkMode must be VXLAN or DirectRouting.",
        ),
        (
            "/provider/authURL",
            json!("keystone"),
            "provider.authURL must be an http:// or https:// Keystone URL",
        ),
        (
            "/provider/tenantID",
            json!("x"),
            "set exactly one of tenantName and tenantID",
        ),
        (
            "/sshAllowList",
            json!(["anywhere"]),
            "sshAllowList must hold IPv4 CIDRs",
        ),
        (
            "/masterNodeGroup/serverGroup/policy",
            json!("Affinity"),
            "serverGroup.policy must be AntiAffinity or ManuallyManaged",
        ),
        (
            "/standard/internalNetworkCIDR",
            json!("192.168.199.0/33"),
            "standard: internalNetworkCIDR must be an IPv4 CIDR",
        ),
    ]);
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::shared_module_dir(&ws.root(), "openstack", "cluster-config");
    let vars = crate::openstack_plans::full("http://127.0.0.1:9/v3");
    assert_refused(&dir, &vars, &cases);
}
