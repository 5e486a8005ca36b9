//! The AWS layouts with the hashicorp/aws stand-in: offline `init` + `validate` of every module,
//! then a table of cluster configurations Deckhouse's schema accepts (every optional field set,
//! and each left out in turn) planned from nothing, asserting the resources and attributes each
//! field must produce: tags at the right level, the allow lists on the load-balancer group, a
//! subnet (pair) for each of a 6-zone region, the bastion's extras, the node role.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_json::Value;
use stratus_layouts_check::catalog::{self, CLOUDS, LAYOUT_MODULES};
use stratus_layouts_check::takeover::{plan_module, PlanSummary};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{aws_tofu, fixture, layouts};

/// A region with six zones.
const ZONES6: [&str; 6] = [
    "eu-central-1a",
    "eu-central-1b",
    "eu-central-1c",
    "eu-central-1d",
    "eu-central-1e",
    "eu-central-1f",
];
const UUID_TAG: &str = "kubernetes.io/cluster/3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
const PREFIX_TAG: &str = "kubernetes.io/cluster/prod-a";

/// The world as an allow list: Deckhouse's default for sshAllowList and publicNetworkAllowList.
fn anywhere() -> Value {
    serde_json::json!([format!("{}/0", Ipv4Addr::UNSPECIFIED)])
}

fn plan(vars: &Value, module: &str) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "aws", "with-nat", module);
    plan_module(&aws_tofu(&ZONES6), &dir, vars).unwrap_or_else(|e| panic!("{module}: {e}"))
}

fn after<'a>(summary: &'a PlanSummary, address: &str) -> &'a Value {
    &summary
        .change(address)
        .unwrap_or_else(|| panic!("{address} is not planned:\n{summary}"))
        .after
}

fn tags(value: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(value["tags"].clone()).unwrap_or_default()
}

fn cidrs(summary: &PlanSummary, resource: &str) -> Vec<String> {
    summary
        .instances(resource)
        .iter()
        .map(|c| {
            c.after["cidr_block"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn full() -> Value {
    fixture("aws-with-nat.tfvars.json")
}

fn without(path: &[&str]) -> Value {
    let mut vars = full();
    let mut field = &mut vars["providerClusterConfiguration"];
    for key in &path[..path.len() - 1] {
        field = &mut field[*key];
    }
    field
        .as_object_mut()
        .unwrap()
        .remove(path[path.len() - 1])
        .unwrap_or_else(|| panic!("the full fixture sets {path:?}"));
    vars
}

fn with(mut vars: Value, key: &str, value: Value) -> Value {
    vars["providerClusterConfiguration"][key] = value;
    vars
}

#[test]
fn aws_layout_modules_validate_with_the_stand_in() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let tofu = aws_tofu(&ZONES6);
    let spec = CLOUDS.iter().find(|c| c.cloud == "aws").unwrap();
    let mut dirs = Vec::new();
    for (layout, _) in spec.layouts {
        for module in LAYOUT_MODULES {
            dirs.push(catalog::layout_module_dir(
                &ws.root(),
                "aws",
                layout,
                module,
            ));
        }
    }
    dirs.extend(catalog::shared_modules(&ws.root(), "aws").unwrap());
    assert!(dirs.len() >= 15, "{dirs:?}");
    for dir in dirs {
        tofu.init(&dir).unwrap();
        let validation = tofu.validate(&dir).unwrap();
        assert!(validation.valid, "{}: {validation:#?}", dir.display());
    }
}

#[test]
fn aws_full_configuration_in_a_six_zone_region() {
    let base = plan(&full(), "base-infrastructure");
    // Subnets for every zone of the region, whatever `zones` limits nodes to; WithNAT cuts the
    // node network into 12 parts (16: ceil(log2(12)) = 4 bits).
    let public = cidrs(&base, "module.network.aws_subnet.kube_public");
    let internal = cidrs(&base, "module.network.aws_subnet.kube_internal");
    assert_eq!(public.len(), 6, "{base}");
    assert_eq!(internal.len(), 6, "{base}");
    assert_eq!(public[0], "10.241.32.0/24");
    assert_eq!(public[5], "10.241.37.0/24");
    assert_eq!(internal[0], "10.241.38.0/24");
    assert_eq!(internal[5], "10.241.43.0/24");
    for subnet in base.instances("module.network.aws_subnet.kube_public") {
        let t = tags(&subnet.after);
        assert_eq!(t.get(UUID_TAG).map(String::as_str), Some("shared"), "{t:?}");
        assert_eq!(
            t.get(PREFIX_TAG).map(String::as_str),
            Some("shared"),
            "{t:?}"
        );
        assert_eq!(t.get("team").map(String::as_str), Some("platform"), "{t:?}");
    }
    assert_eq!(
        after(&base, "module.network.aws_subnet.kube_internal[3]")["availability_zone"],
        "eu-central-1d"
    );

    // publicNetworkAllowList on the load-balancer group and ICMP to nodes; sshAllowList on SSH.
    let allow = serde_json::json!(["198.51.100.0/24"]);
    let lb_rule = after(
        &base,
        "module.security-groups.aws_security_group_rule.allow-all-incoming-traffic-to-loadbalancer[0]",
    );
    assert_eq!(lb_rule["cidr_blocks"], allow);
    assert_eq!(
        after(
            &base,
            "module.security-groups.aws_security_group_rule.to-node-icmp[0]"
        )["cidr_blocks"],
        allow
    );
    assert_eq!(
        after(
            &base,
            "module.security-groups.aws_security_group_rule.allow-ssh-for-everyone[0]"
        )["cidr_blocks"],
        serde_json::json!(["203.0.113.0/24"])
    );
    // Only the node group carries the cluster tags (the CCM's rules go there).
    let node_group = tags(after(
        &base,
        "module.security-groups.aws_security_group.node[0]",
    ));
    assert!(node_group.contains_key(UUID_TAG) && node_group.contains_key(PREFIX_TAG));
    let lb_group = after(
        &base,
        "module.security-groups.aws_security_group.loadbalancer[0]",
    );
    assert_eq!(lb_group["name"], "prod-a-loadbalancer");
    assert!(!tags(lb_group).contains_key(UUID_TAG));

    // The bastion: its additionalTags and disk (its additionalSecurityGroups: below, where the
    // other groups are not there to make the list unknown).
    let bastion = after(&base, "module.bastion[0].aws_instance.node");
    assert_eq!(
        tags(bastion).get("role").map(String::as_str),
        Some("bastion")
    );
    assert_eq!(bastion["root_block_device"][0]["volume_type"], "gp3");
    assert_eq!(bastion["root_block_device"][0]["volume_size"], 30);
    assert!(base
        .change("module.bastion[0].aws_eip_association.eip[0]")
        .is_some());

    // iamNodeRole: no node role of our own, the profile carries the existing one;
    // additionalRolePolicies: a policy.
    assert!(base.instances("module.iam.aws_iam_role.node").is_empty());
    assert_eq!(
        after(&base, "module.iam.aws_iam_instance_profile.node")["role"],
        "existing-node-role"
    );
    assert!(base
        .change("module.iam.aws_iam_role_policy.additional[0]")
        .is_some());
    assert_eq!(
        base.instances("module.network.aws_vpc_peering_connection.kube")
            .len(),
        1
    );
}

#[test]
fn aws_each_optional_field_left_out_takes_deckhouse_default() {
    // nodeNetworkCIDR: the VPC's CIDR is cut instead.
    let base = plan(&without(&["nodeNetworkCIDR"]), "base-infrastructure");
    let public = cidrs(&base, "module.network.aws_subnet.kube_public");
    assert_eq!(
        (public[0].as_str(), public[1].as_str()),
        ("10.241.0.0/20", "10.241.16.0/20")
    );
    // publicNetworkAllowList and sshAllowList: the world.
    let base = plan(&without(&["publicNetworkAllowList"]), "base-infrastructure");
    assert_eq!(
        after(
            &base,
            "module.security-groups.aws_security_group_rule.allow-all-incoming-traffic-to-loadbalancer[0]"
        )["cidr_blocks"],
        anywhere()
    );
    let base = plan(&without(&["sshAllowList"]), "base-infrastructure");
    assert_eq!(
        after(
            &base,
            "module.security-groups.aws_security_group_rule.allow-ssh-for-everyone[0]"
        )["cidr_blocks"],
        anywhere()
    );
    // tags: only the cluster tags, Name and the role tag on subnets.
    let base = plan(&without(&["tags"]), "base-infrastructure");
    let t = tags(after(&base, "module.network.aws_subnet.kube_public[0]"));
    assert!(!t.contains_key("team") && t.contains_key(UUID_TAG), "{t:?}");
    // iamNodeRole: our own node role; additionalRolePolicies: no extra policy; peeredVPCs:
    // no peering; the bastion: none.
    let base = plan(&without(&["iamNodeRole"]), "base-infrastructure");
    assert_eq!(base.instances("module.iam.aws_iam_role.node").len(), 1);
    let base = plan(&without(&["additionalRolePolicies"]), "base-infrastructure");
    assert!(base
        .change("module.iam.aws_iam_role_policy.additional[0]")
        .is_none());
    let base = plan(&without(&["peeredVPCs"]), "base-infrastructure");
    assert!(base
        .instances("module.network.aws_vpc_peering_connection.kube")
        .is_empty());
    let base = plan(
        &without(&["withNAT", "bastionInstance"]),
        "base-infrastructure",
    );
    assert!(base
        .instances("module.bastion[0].aws_instance.node")
        .is_empty());
    assert_eq!(base.outputs["bastion_ip_address_for_ssh"], "");
}

#[test]
fn aws_layouts_and_switches_shape_the_network() {
    // WithoutNAT: public subnets only, cut in 8 (ceil(log2(6)) = 3 bits); the public route table
    // carries the cluster tags (pod routes go there).
    let mut vars = with(without(&["withNAT"]), "layout", "WithoutNAT".into());
    let base = plan(&vars, "base-infrastructure");
    let public = cidrs(&base, "module.network.aws_subnet.kube_public");
    assert_eq!(public.len(), 6);
    assert_eq!(public[1], "10.241.34.0/23");
    assert!(base
        .instances("module.network.aws_subnet.kube_internal")
        .is_empty());
    assert!(
        tags(after(&base, "module.network.aws_route_table.kube_public")).contains_key(UUID_TAG)
    );
    // The deprecated Standard: internal subnets behind NAT, no bastion.
    vars["providerClusterConfiguration"]["layout"] = "Standard".into();
    let base = plan(&vars, "base-infrastructure");
    assert_eq!(
        base.instances("module.network.aws_subnet.kube_internal")
            .len(),
        6
    );
    assert!(base
        .change("module.network.aws_nat_gateway.kube[0]")
        .is_some());
    assert!(base
        .instances("module.bastion[0].aws_instance.node")
        .is_empty());
    // disableDefaultSecurityGroup: no group at all.
    let base = plan(
        &with(full(), "disableDefaultSecurityGroup", true.into()),
        "base-infrastructure",
    );
    assert!(
        base.matching(|c| c.address.starts_with("module.security-groups."))
            .is_empty(),
        "{base}"
    );
    assert_eq!(
        after(&base, "module.bastion[0].aws_instance.node")["vpc_security_group_ids"],
        serde_json::json!(["sg-0fedcba9876543210"])
    );
    // existingVPCID: no VPC of ours; subnets from nodeNetworkCIDR in that VPC.
    let mut vars = without(&["vpcNetworkCIDR"]);
    vars["providerClusterConfiguration"]["existingVPCID"] = "vpc-0123456789abcdef9".into();
    let base = plan(&vars, "base-infrastructure");
    assert!(base.instances("module.vpc.aws_vpc.kube").is_empty());
    assert_eq!(
        after(&base, "module.network.aws_subnet.kube_public[0]")["vpc_id"],
        "vpc-0123456789abcdef9"
    );
}

#[test]
fn aws_master_and_static_nodes_carry_their_group_settings() {
    // Master 1 of 3 in zones a and b: zone b, its internal subnet (WithNAT), no Elastic IP.
    let master = plan(&full(), "master-node");
    let node = after(&master, "module.master-node.aws_instance.node");
    let t = tags(node);
    assert_eq!(t.get("role").map(String::as_str), Some("master"), "{t:?}");
    assert_eq!(t.get("Name").map(String::as_str), Some("prod-a-master-1"));
    assert!(t.contains_key(UUID_TAG) && t.contains_key(PREFIX_TAG));
    assert_eq!(node["subnet_id"], "subnet-for-prod-a-internal-1");
    assert_eq!(node["iam_instance_profile"], "prod-a-master");
    assert_eq!(node["root_block_device"][0]["volume_size"], 60);
    let groups = node["vpc_security_group_ids"].as_array().unwrap();
    for g in [
        "sg-for-prod-a-node",
        "sg-for-prod-a-ssh-accessible",
        "sg-0123456789abcdef0",
    ] {
        assert!(groups.contains(&Value::from(g)), "{groups:?}");
    }
    let etcd = after(
        &master,
        "module.master-node.aws_ebs_volume.kubernetes_data[0]",
    );
    assert_eq!(
        (&etcd["size"], &etcd["type"], &etcd["availability_zone"]),
        (
            &Value::from(30),
            &Value::from("io2"),
            &Value::from("eu-central-1b")
        )
    );
    assert!(master
        .instances("module.master-node.aws_eip.eip")
        .is_empty());

    // WithoutNAT: the master is public with an Elastic IP.
    let vars = with(without(&["withNAT"]), "layout", "WithoutNAT".into());
    let master = plan(&vars, "master-node");
    assert_eq!(
        after(&master, "module.master-node.aws_instance.node")["subnet_id"],
        "subnet-for-prod-a-public-1"
    );
    assert!(master
        .change("module.master-node.aws_eip_association.eip[0]")
        .is_some());

    // The deprecated Standard: the master is internal, without an Elastic IP (Deckhouse's
    // Standard master-node layout gives it no public address; there is no bastion either).
    let vars = with(without(&["withNAT"]), "layout", "Standard".into());
    let master = plan(&vars, "master-node");
    assert_eq!(
        after(&master, "module.master-node.aws_instance.node")["subnet_id"],
        "subnet-for-prod-a-internal-1"
    );
    assert!(master
        .instances("module.master-node.aws_eip.eip")
        .is_empty());

    // Static node 1 of group frontend (zone b only).
    let mut vars = full();
    vars["nodeGroupName"] = "frontend".into();
    let stat = plan(&vars, "static-node");
    let node = after(&stat, "module.static-node.aws_instance.node");
    let t = tags(node);
    assert_eq!(t.get("role").map(String::as_str), Some("frontend"), "{t:?}");
    assert_eq!(t.get("Name").map(String::as_str), Some("prod-a-frontend-1"));
    assert_eq!(node["subnet_id"], "subnet-for-prod-a-internal-1");
    assert_eq!(node["iam_instance_profile"], "prod-a-node");
    assert_eq!(node["root_block_device"][0]["volume_type"], "gp2");
    assert_eq!(node["root_block_device"][0]["volume_size"], 40);
    assert!(node["vpc_security_group_ids"]
        .as_array()
        .unwrap()
        .contains(&Value::from("sg-0123456789abcdef1")));
}

/// A field Deckhouse's schema does not have fails the layout's plan, named (cluster-config's
/// table of refusals checks each level; this is the same check reached through a layout module).
#[test]
fn aws_layout_plan_fails_on_an_unknown_field_naming_it() {
    let mut vars = full();
    vars["providerClusterConfiguration"]["masterNodeGroup"]["instanceClass"]["additionalTags"] =
        serde_json::json!({"role": "master"});
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "aws", "with-nat", "master-node");
    let error = plan_module(&aws_tofu(&ZONES6), &dir, &vars)
        .map(|summary| summary.to_string())
        .expect_err("a plan with a misplaced additionalTags");
    assert!(
        crate::common::squash(&error.to_string()).contains(
            "has no field providerClusterConfiguration.masterNodeGroup.instanceClass.additionalTags:"
        ),
        "{error}"
    );
}

#[test]
fn aws_tofu_test_passes_with_a_mocked_provider_and_fails_when_the_discovery_data_points_elsewhere()
{
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "aws", "with-nat", "base-infrastructure");
    let tofu = aws_tofu(&ZONES6);
    tofu.init(&dir).unwrap();
    let run = tofu.test(&dir).unwrap();
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("1 passed, 0 failed"), "{}", run.stdout);

    let outputs = dir.join("outputs.tf");
    let text = std::fs::read_to_string(&outputs).unwrap();
    let broken = text.replace(
        ": module.security-groups.load_balancer_group_id\n",
        ": module.security-groups.node_group_id\n",
    );
    assert_ne!(
        text, broken,
        "the discovery data's group moved; update this test"
    );
    std::fs::write(&outputs, broken).unwrap();
    let run = tofu.test(&dir).unwrap();
    assert!(!run.success, "{}", run.stdout);
    assert!(
        crate::common::squash(&format!("{}{}", run.stdout, run.stderr))
            .contains("loadBalancerSecurityGroup must be the load-balancer group"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}
