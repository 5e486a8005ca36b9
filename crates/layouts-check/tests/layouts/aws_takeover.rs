//! Taking over clusters Deckhouse's AWS layouts built (Terraform 0.14 states): for WithoutNAT,
//! WithNAT and the deprecated Standard, a state of each layout module holding Deckhouse's resource addresses
//! (`testdata/deckhouse-aws/*.tfstate`, written from the facts of the fidelity reference, with
//! provider `registry.terraform.io/hashicorp/aws` as Terraform 0.14 recorded it) is planned
//! against our layout with the hashicorp/aws stand-in: nothing is destroyed or replaced, the
//! resources move. The states' subnet and security-group IDs are the ones the stand-in's data
//! sources answer for those names (`subnet-for-<Name>`, `sg-for-<name>`), so the masters and
//! static nodes find the same cloud the state describes.

use serde_json::Value;
use stratus_layouts_check::catalog;
use stratus_layouts_check::schema::violations;
use stratus_layouts_check::takeover::{plan_takeover, PlanSummary};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{aws_tofu, fixture, layouts};

/// The region of the states: three zones.
const ZONES: [&str; 3] = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];
/// The load-balancer group of the states (`<prefix>-loadbalancer`).
const LB_GROUP: &str = "sg-0b1c2d3e4f5a6b7c8";

fn takeover_in(ws: &Workspace, layout: &str, module: &str) -> PlanSummary {
    let dir = catalog::layout_module_dir(&ws.root(), "aws", layout, module);
    let vars = fixture(&format!("deckhouse-aws/{layout}.tfvars.json"));
    let state = fixture(&format!("deckhouse-aws/{layout}-{module}.tfstate"));
    plan_takeover(&aws_tofu(&ZONES), &dir, &vars, &state)
        .unwrap_or_else(|e| panic!("{layout}/{module}: {e}"))
}

fn takeover(layout: &str, module: &str) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    takeover_in(&ws, layout, module)
}

#[test]
fn aws_takeover_of_deckhouse_states_destroys_and_replaces_nothing() {
    for layout in ["without-nat", "with-nat", "standard"] {
        for module in catalog::LAYOUT_MODULES {
            let summary = takeover(layout, module);
            let counts = summary.counts();
            eprintln!("{layout}/{module}: {counts:?}");
            assert!(
                summary.destructive().is_empty(),
                "{layout}/{module} would destroy or replace:\n{summary}"
            );
            assert_eq!(
                (counts.deletes, counts.replaces),
                (0, 0),
                "{layout}/{module}"
            );
            if module != "static-node" {
                assert!(
                    counts.moves > 0,
                    "{layout}/{module}: Deckhouse's addresses move:\n{summary}"
                );
            }
            // What is created is ours alone: the masters' own role and its policies.
            for created in summary.matching(|c| c.is_create()) {
                assert!(
                    created.address.starts_with("module.iam.")
                        && created.address.contains("master")
                        || created
                            .address
                            .starts_with("module.iam.aws_iam_role_policy."),
                    "{layout}/{module}: unexpected new resource {created}"
                );
            }
        }
    }
}

#[test]
fn aws_takeover_of_deckhouse_vpc_peerings_moves_them_and_destroys_nothing() {
    // WithNAT declares its peerings at the top level, WithoutNAT (and Standard) in
    // module.vpc-peering[0]; both states peer with two VPCs.
    for (layout, prefix) in [("with-nat", ""), ("without-nat", "module.vpc-peering[0].")] {
        let ws = Workspace::copy(&layouts()).unwrap();
        let dir = catalog::layout_module_dir(&ws.root(), "aws", layout, "base-infrastructure");
        let vars = fixture(&format!("deckhouse-aws/{layout}-peered.tfvars.json"));
        let state = fixture(&format!(
            "deckhouse-aws/{layout}-peered-base-infrastructure.tfstate"
        ));
        let summary = plan_takeover(&aws_tofu(&ZONES), &dir, &vars, &state)
            .unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert!(
            summary.destructive().is_empty(),
            "{layout} would destroy or replace:\n{summary}"
        );
        for resource in [
            "aws_vpc_peering_connection.kube",
            "aws_vpc_peering_connection_accepter.kube",
            "aws_route.kube",
            "aws_route.target",
        ] {
            for i in 0..2 {
                let to = format!("module.network.{resource}[{i}]");
                let change = summary
                    .change(&to)
                    .unwrap_or_else(|| panic!("{layout}: {to} is not planned:\n{summary}"));
                assert_eq!(
                    change.previous_address.as_deref(),
                    Some(format!("{prefix}{resource}[{i}]").as_str()),
                    "{layout}: {change}"
                );
                assert!(!change.is_create(), "{layout}: {change}");
            }
        }
        // The peer routes back to the cluster's VPC from its first subnet's table.
        let back = after_of(&summary, "module.network.aws_route.target[1]");
        assert_eq!(back["destination_cidr_block"], "10.241.0.0/16", "{layout}");
        assert_eq!(
            back["route_table_id"], "rtb-for-subnet-in-vpc-0peer0000000000b",
            "{layout}"
        );
        let nodes_table = if layout == "with-nat" {
            "rtb-internal"
        } else {
            "rtb-public"
        };
        assert_eq!(
            after_of(&summary, "module.network.aws_route.kube[0]")["route_table_id"],
            nodes_table,
            "{layout}: the route to the peer is in the nodes' table"
        );
    }
}

fn after_of<'a>(summary: &'a PlanSummary, address: &str) -> &'a Value {
    &summary
        .change(address)
        .unwrap_or_else(|| panic!("{address} is not planned:\n{summary}"))
        .after
}

#[test]
fn aws_takeover_moves_each_deckhouse_address() {
    let summary = takeover("with-nat", "base-infrastructure");
    for (from, to) in [
        (
            "aws_subnet.kube_public[2]",
            "module.network.aws_subnet.kube_public[2]",
        ),
        (
            "aws_subnet.kube_internal[0]",
            "module.network.aws_subnet.kube_internal[0]",
        ),
        ("aws_eip.natgw", "module.network.aws_eip.natgw[0]"),
        ("aws_iam_role.node", "module.iam.aws_iam_role.node[0]"),
        (
            "aws_instance.bastion[0]",
            "module.bastion[0].aws_instance.node",
        ),
    ] {
        let change = summary
            .change(to)
            .unwrap_or_else(|| panic!("{to} is not planned:\n{summary}"));
        assert_eq!(change.previous_address.as_deref(), Some(from), "{change}");
    }
    // Addresses equal to Deckhouse's stay where they are.
    for same in [
        "module.vpc.aws_vpc.kube[0]",
        "module.security-groups.aws_security_group.node[0]",
        "module.security-groups.aws_security_group.loadbalancer[0]",
        "module.security-groups.aws_security_group.ssh-accessible[0]",
        "module.security-groups.aws_security_group_rule.to-node-icmp[0]",
        "aws_key_pair.ssh",
    ] {
        let change = summary
            .change(same)
            .unwrap_or_else(|| panic!("{same} is not planned:\n{summary}"));
        assert!(!change.is_move(), "{change}");
        assert_eq!(change.actions, ["no-op"], "{change}");
    }
    let master = takeover("without-nat", "master-node");
    assert_eq!(
        master
            .change("module.master-node.aws_instance.node")
            .and_then(|c| c.previous_address.as_deref()),
        Some("module.master-node.aws_instance.master"),
        "{master}"
    );
}

#[test]
fn aws_takeover_without_the_moved_blocks_would_destroy_the_network() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "aws", "without-nat", "base-infrastructure");
    std::fs::remove_file(dir.join("moved.tf")).unwrap();
    let summary = takeover_in(&ws, "without-nat", "base-infrastructure");
    let destroyed: Vec<&str> = summary
        .destructive()
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert!(
        destroyed.contains(&"aws_subnet.kube_public[0]"),
        "{destroyed:?}"
    );
}

#[test]
fn aws_discovery_data_of_a_taken_over_cluster_is_valid_and_points_at_the_load_balancer_group() {
    let schema = fixture("deckhouse-aws/cloud_discovery_data.schema.json");
    for layout in ["without-nat", "with-nat"] {
        let summary = takeover(layout, "base-infrastructure");
        let data = summary
            .outputs
            .get("cloud_discovery_data")
            .unwrap_or_else(|| panic!("{layout}: no known cloud_discovery_data"));
        let problems = violations(&schema, data);
        assert!(problems.is_empty(), "{layout}: {problems:#?}\n{data:#}");
        assert_eq!(data["loadBalancerSecurityGroup"], LB_GROUP, "{layout}");
        assert_eq!(
            data["instances"]["ami"], "ami-0123456789abcdef0",
            "{layout}"
        );
        let subnets = data["zoneToSubnetIdMap"].as_object().unwrap();
        let kind = if layout == "with-nat" {
            "internal"
        } else {
            "public"
        };
        assert_eq!(
            subnets.get("eu-central-1b"),
            Some(&Value::from(format!("subnet-for-prod-a-{kind}-1"))),
            "{layout}: nodes go to the {kind} subnets"
        );
        assert_eq!(
            data["instances"]["associatePublicIPAddress"],
            layout == "without-nat",
            "{layout}"
        );
    }
    // The schema is not a rubber stamp: the old discovery data (no ami, apiVersion v1) fails.
    let mut old = summary_data("without-nat");
    old["apiVersion"] = "deckhouse.io/v1".into();
    old["instances"].as_object_mut().unwrap().remove("ami");
    let problems = violations(&schema, &old);
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

fn summary_data(layout: &str) -> Value {
    takeover(layout, "base-infrastructure").outputs["cloud_discovery_data"].clone()
}

/// The `from = … to = …` pairs of the `moved` blocks in one file.
fn moved_pairs(text: &str) -> Vec<(String, String)> {
    let re = regex::Regex::new(r"moved\s*\{\s*from\s*=\s*(\S+)\s*to\s*=\s*(\S+)\s*\}").unwrap();
    re.captures_iter(text)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect()
}

#[test]
fn aws_migration_doc_lists_every_deckhouse_address_the_layouts_move() {
    let doc = std::fs::read_to_string(crate::common::repo().join("docs/src/layouts.md")).unwrap();
    let section = doc
        .split("## Taking over a cluster Deckhouse built with Terraform 0.14 (AWS)")
        .nth(1)
        .expect("the layouts page has the migration section");
    let root = layouts();
    let mut pairs = Vec::new();
    for (layout, _) in catalog::CLOUDS
        .iter()
        .find(|c| c.cloud == "aws")
        .unwrap()
        .layouts
    {
        for (module, file) in [
            ("base-infrastructure", "moved.tf"),
            ("master-node", "main.tf"),
        ] {
            let path = catalog::layout_module_dir(&root, "aws", layout, module).join(file);
            pairs.extend(moved_pairs(&std::fs::read_to_string(&path).unwrap()));
        }
    }
    assert!(pairs.len() >= 20, "{pairs:?}");
    for (from, to) in pairs {
        let stem = |a: &str| a.trim_end_matches("[0]").to_string();
        assert!(
            section.contains(&format!("`{}", stem(&from))) || section.contains(&stem(&from)),
            "the migration table lacks {from}"
        );
        let to_named = section.contains(&stem(&to))
            || to.ends_with(&from.replace("[0]", ""))
            || to.trim_end_matches("[0]").ends_with(&stem(&from));
        assert!(to_named, "the migration table lacks {from} -> {to}");
    }
    assert!(section.contains("tofu plan -refresh=false"));
}
