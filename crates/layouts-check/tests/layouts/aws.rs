//! The AWS layouts' contract: static checks of the HCL, the IAM policy against
//! `deploy/iam-policy.json`, and the tag values (evaluated by tofu from the provider-free
//! `cluster-config` module) run through the CCM's own subnet selection and node-group choice.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use stratus_aws_api::ec2::SecurityGroup;
use stratus_aws_api::node_rules::node_group_of;
use stratus_aws_api::subnets::{select_subnets, SubnetInfo, ROLE_ELB, ROLE_INTERNAL_ELB};
use stratus_aws_api::tags::cluster_tag_key;
use stratus_layouts_check::aws_contract::{self, same_policy, CCM_POLICY_FILE};
use stratus_layouts_check::catalog;
use stratus_layouts_check::workspace::Workspace;

use crate::common::{assert_refused, fixture, layouts, lines, repo, tofu};

const AWS_LAYOUTS: [&str; 3] = ["without-nat", "with-nat", "standard"];
/// The tag the node-termination-handler (queue mode) requires before acting on an instance.
const NTH_MANAGED_TAG: &str = "aws-node-termination-handler/managed";
const UUID: &str = "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";

#[test]
fn aws_layouts_tag_what_the_ccm_csi_and_termination_handler_read() {
    let problems = aws_contract::check(&layouts(), &AWS_LAYOUTS);
    assert!(problems.is_empty(), "{}", lines(&problems));
}

#[test]
fn aws_contract_check_fails_when_subnets_lose_their_role_tags_or_imds_is_unreachable() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let network = catalog::shared_module_dir(&ws.root(), "aws", "network").join("main.tf");
    let text = std::fs::read_to_string(&network).unwrap();
    std::fs::write(&network, text.replace("var.public_subnet_tags", "var.tags")).unwrap();
    let node = catalog::shared_module_dir(&ws.root(), "aws", "node").join("main.tf");
    let text = std::fs::read_to_string(&node).unwrap();
    std::fs::write(
        &node,
        text.replace(
            "http_put_response_hop_limit = 2",
            "http_put_response_hop_limit = 1",
        ),
    )
    .unwrap();
    let problems = aws_contract::check(&ws.root(), &AWS_LAYOUTS);
    let text = lines(&problems);
    assert!(text.contains("aws_subnet.kube_public"), "{text}");
    assert!(text.contains("hop_limit must be at least 2"), "{text}");
}

#[test]
fn aws_masters_carry_exactly_the_ccm_iam_policy() {
    let layout_policy = std::fs::read_to_string(
        catalog::shared_module_dir(&layouts(), "aws", "iam").join(CCM_POLICY_FILE),
    )
    .unwrap();
    let deploy = std::fs::read_to_string(repo().join("deploy/iam-policy.json")).unwrap();
    assert!(
        same_policy(&layout_policy, &deploy).unwrap(),
        "layouts/aws/terraform-modules/iam/{CCM_POLICY_FILE} differs from deploy/iam-policy.json"
    );
    let mut other: serde_json::Value = serde_json::from_str(&deploy).unwrap();
    other["Statement"][0]["Action"][0] = "ec2:DescribeImages".into();
    assert!(!same_policy(&layout_policy, &other.to_string()).unwrap());
}

fn tags(value: &serde_json::Value) -> BTreeMap<String, String> {
    serde_json::from_value(value.clone()).expect("a tag map")
}

fn evaluate(vars: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    let ws = Workspace::copy(&layouts()).unwrap();
    tofu()
        .apply_outputs(
            &catalog::shared_module_dir(&ws.root(), "aws", "cluster-config"),
            vars,
        )
        .unwrap()
}

fn subnet(id: &str, public: bool, tags: BTreeMap<String, String>) -> SubnetInfo {
    SubnetInfo {
        id: id.into(),
        zone: "eu-central-1a".into(),
        tags,
        public,
        cidr: String::new(),
    }
}

/// The tags the layouts put on subnets, instances and security groups, fed to the CCM's own
/// decisions: load balancers land in the layout's subnets, LB rules in the cluster group.
#[test]
fn aws_tag_values_drive_the_ccm_to_the_layout_subnets_and_group() {
    let with_nat = fixture("aws-with-nat.tfvars.json");
    let mut without_nat = with_nat.clone();
    without_nat["providerClusterConfiguration"]["layout"] = "WithoutNAT".into();
    let key = cluster_tag_key(UUID);

    for (layout, vars) in [("WithNAT", &with_nat), ("WithoutNAT", &without_nat)] {
        let out = evaluate(vars);
        let cluster = tags(&out["cluster_tags"]);
        assert_eq!(
            cluster.get(&key).map(String::as_str),
            Some("shared"),
            "{layout}: {cluster:?}"
        );
        assert_eq!(
            cluster
                .get("kubernetes.io/cluster/prod-a")
                .map(String::as_str),
            Some("shared"),
            "{layout}: Deckhouse also tags with the prefix: {cluster:?}"
        );
        let instance = tags(&out["instance_tags"]);
        assert!(
            instance.contains_key(&key),
            "{layout}: the instance cache lists by {key}: {instance:?}"
        );
        assert!(
            instance.contains_key(NTH_MANAGED_TAG),
            "{layout}: {instance:?}"
        );
        let public = tags(&out["public_subnet_tags"]);
        assert_eq!(
            public.get(ROLE_ELB).map(String::as_str),
            Some("1"),
            "{layout}: {public:?}"
        );

        // A foreign cluster's public subnet and an untagged one compete in the same zone.
        let mut foreign = BTreeMap::new();
        foreign.insert(cluster_tag_key("other-cluster"), "owned".to_string());
        foreign.insert(ROLE_ELB.to_string(), "1".to_string());
        let mut candidates = vec![
            subnet("subnet-0foreign", true, foreign),
            subnet("subnet-0untagged", true, BTreeMap::new()),
            subnet("subnet-9layout-public", true, public),
        ];
        if layout == "WithNAT" {
            let private = tags(&out["internal_subnet_tags"]);
            assert_eq!(
                private.get(ROLE_INTERNAL_ELB).map(String::as_str),
                Some("1")
            );
            candidates.push(subnet("subnet-9layout-private", false, private));
        }
        assert_eq!(
            select_subnets(&candidates, UUID, false),
            vec!["subnet-9layout-public".to_string()],
            "{layout}: internet-facing load balancers"
        );
        let internal = if layout == "WithNAT" {
            "subnet-9layout-private"
        } else {
            "subnet-9layout-public"
        };
        assert_eq!(
            select_subnets(&candidates, UUID, true),
            vec![internal.to_string()],
            "{layout}: internal load balancers"
        );

        let group = |id: &str, tags: BTreeMap<String, String>| SecurityGroup {
            id: id.into(),
            name: id.into(),
            vpc_id: "vpc-1".into(),
            tags,
            cidr_rules: Default::default(),
            group_rules: Default::default(),
        };
        let known: BTreeMap<String, SecurityGroup> = [
            group("sg-cluster", cluster.clone()),
            group("sg-ssh", tags(&out["tags"])),
        ]
        .into_iter()
        .map(|g| (g.id.clone(), g))
        .collect();
        assert_eq!(
            node_group_of(&["sg-cluster".into(), "sg-ssh".into()], &known, UUID),
            Ok(Some("sg-cluster".to_string())),
            "{layout}: load-balancer rules must go to the cluster group"
        );
    }
}

/// Configurations Deckhouse's schema refuses, one bad field at a time: each refusal names the
/// field, a bad value and an unknown field alike (at every level the schema fixes).
#[test]
fn aws_configuration_deckhouse_refuses_is_refused_naming_the_field() {
    let unknown = |path: &str| {
        format!(
            "Deckhouse's AWSClusterConfiguration has no field providerClusterConfiguration.{path}:"
        )
    };
    let unknown_fields = [
        ("/vpcNetworkCidr", "vpcNetworkCidr"),
        ("/provider/zone", "provider.zone"),
        ("/masterNodeGroup/diskType", "masterNodeGroup.diskType"),
        // Deckhouse puts additionalTags beside instanceClass: inside it, it would be dropped.
        (
            "/masterNodeGroup/instanceClass/additionalTags",
            "masterNodeGroup.instanceClass.additionalTags",
        ),
        (
            "/masterNodeGroup/instanceClass/etcdDisk/iops",
            "masterNodeGroup.instanceClass.etcdDisk.iops",
        ),
        ("/nodeGroups/0/labels", "nodeGroups[0].labels"),
        (
            "/nodeGroups/0/instanceClass/etcdDisk",
            "nodeGroups[0].instanceClass.etcdDisk",
        ),
        (
            "/nodeGroups/0/nodeTemplate/tains",
            "nodeGroups[0].nodeTemplate.tains",
        ),
        (
            "/nodeGroups/0/nodeTemplate/taints/0/operator",
            "nodeGroups[0].nodeTemplate.taints[0].operator",
        ),
        ("/withNAT/bastion", "withNAT.bastion"),
        (
            "/withNAT/bastionInstance/replicas",
            "withNAT.bastionInstance.replicas",
        ),
        (
            "/withNAT/bastionInstance/instanceClass/etcdDisk",
            "withNAT.bastionInstance.instanceClass.etcdDisk",
        ),
        ("/withoutNAT", "withoutNAT.bastionInstance"),
        ("/standard", "standard.bastionInstance"),
    ];
    let messages: Vec<String> = unknown_fields
        .iter()
        .map(|(_, path)| unknown(path))
        .collect();
    let section = || json!({"bastionInstance": {}});
    let mut cases: Vec<(&str, Value, &str)> = unknown_fields
        .iter()
        .zip(&messages)
        .map(|((pointer, _), message)| {
            let value = match *pointer {
                "/withoutNAT" | "/standard" => section(),
                _ => json!("x"),
            };
            (*pointer, value, message.as_str())
        })
        .collect();
    cases.extend([
        (
            "/layout",
            "Simple".into(),
            "providerClusterConfiguration.layout must be WithoutNAT, WithNAT or Standard",
        ),
        (
            "/existingVPCID",
            "vpc-0123456789abcdef0".into(),
            "set exactly one of vpcNetworkCIDR (a new VPC) and existingVPCID",
        ),
        (
            "/nodeNetworkCIDR",
            "10.241.32.0/33".into(),
            "vpcNetworkCIDR and nodeNetworkCIDR must be IPv4 CIDRs",
        ),
        (
            "/publicNetworkAllowList",
            json!(["anywhere"]),
            "sshAllowList and publicNetworkAllowList must hold IPv4 CIDRs",
        ),
        (
            "/additionalRolePolicies",
            json!(["ec2 Describe"]),
            "additionalRolePolicies must hold at least one IAM action",
        ),
        (
            "/additionalRolePolicies",
            json!([]),
            "additionalRolePolicies must hold at least one IAM action",
        ),
        (
            "/zones",
            json!([]),
            "zones and masterNodeGroup.zones must name at least one zone",
        ),
        (
            "/masterNodeGroup/replicas",
            0.into(),
            "masterNodeGroup.replicas must be a whole number of at least 1",
        ),
        (
            "/masterNodeGroup/instanceClass/diskType",
            "gp9".into(),
            "instanceClass.diskType (masterNodeGroup, nodeGroups, withNAT.bastionInstance) must be one of",
        ),
    ]);
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::shared_module_dir(&ws.root(), "aws", "cluster-config");
    assert_refused(&dir, &fixture("aws-with-nat.tfvars.json"), &cases);
}

/// The three AWS layouts share their files (the configuration's layout decides): a copy edited in
/// one layout only would make the layouts drift apart.
#[test]
fn aws_layouts_are_the_same_files() {
    let root = layouts();
    for module in catalog::LAYOUT_MODULES {
        let read = |layout: &str| {
            let dir = catalog::layout_module_dir(&root, "aws", layout, module);
            let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "tf"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read_to_string(e.path()).unwrap(),
                    )
                })
                .collect();
            files.sort();
            files
        };
        let with_nat = read("with-nat");
        assert!(!with_nat.is_empty());
        for layout in ["without-nat", "standard"] {
            assert!(
                read(layout) == with_nat,
                "layouts/aws/layouts/{layout}/{module} differs from with-nat/{module}"
            );
        }
    }
}
