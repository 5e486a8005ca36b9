//! `deploy/albc-iam-policy.json` grants exactly the AWS actions the controller's code calls:
//! every `ctx.elbv2.<method>(` in `crates/albc/src`, mapped to its API action, every
//! `.call("<Action>"` of the one ELBv2 client the controller drives (`crates/aws-api/src/elbv2`),
//! the EC2 reads of the shared subnet discovery when `SubnetCache` is used, the security-group calls of the managed ALB group
//! (`ingress/security.rs`), the shared backend group (`ingress/backend_group.rs`) and the
//! bindings' networking rules (`tgb/sg_rules.rs`), and nothing else.

use std::collections::BTreeSet;

use stratus_scenarios::kube_fixture::repo_root;

/// The `ElbV2Api` methods the controller may call, with their API action.
const METHODS: &[(&str, &str)] = &[
    ("target_group_info", "DescribeTargetGroups"),
    ("target_group", "DescribeTargetGroups"),
    ("target_health", "DescribeTargetHealth"),
    ("register_targets", "RegisterTargets"),
    ("deregister_targets", "DeregisterTargets"),
];

/// The `stratus_aws_api::Ec2` security-group methods the managed ALB group
/// (`ingress/security.rs`), the shared backend group (`ingress/backend_group.rs`) and the
/// bindings' networking rules (`tgb/sg_rules.rs`) call, with their API actions.
const EC2_METHODS: &[(&str, &[&str])] = &[
    ("security_groups_tagged", &["DescribeSecurityGroups"]),
    // Tags on create; a duplicate name is looked up.
    (
        "create_security_group",
        &[
            "CreateSecurityGroup",
            "CreateTags",
            "DescribeSecurityGroups",
        ],
    ),
    (
        "update_cidr_rules",
        &[
            "AuthorizeSecurityGroupIngress",
            "RevokeSecurityGroupIngress",
        ],
    ),
    ("delete_security_group", &["DeleteSecurityGroup"]),
    // tgb/sg_rules.rs: the targets' groups and their rules.
    ("security_groups_by_id", &["DescribeSecurityGroups"]),
    ("authorize_group_rule", &["AuthorizeSecurityGroupIngress"]),
    ("revoke_group_rule", &["RevokeSecurityGroupIngress"]),
    // tgb/sg_rules.rs: the targets' network interfaces.
    ("interfaces_by", &["DescribeNetworkInterfaces"]),
];

#[test]
fn policy_grants_exactly_the_calls_made() {
    let mut used = BTreeSet::new();
    let mut stack = vec![repo_root().join("crates/albc/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            // Calls may span lines (`ctx\n.elbv2\n.method(`).
            let text: String = std::fs::read_to_string(&path)
                .unwrap()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if text.contains("SubnetCache::new(") {
                // stratus_aws_api::ec2: Ec2::vpc_subnets.
                used.insert("ec2:DescribeSubnets".to_string());
                used.insert("ec2:DescribeRouteTables".to_string());
            }
            if path.ends_with("ingress/security.rs")
                || path.ends_with("ingress/backend_group.rs")
                || path.ends_with("tgb/sg_rules.rs")
            {
                for (i, _) in text.match_indices("ec2.") {
                    let rest = &text[i + "ec2.".len()..];
                    let method: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !rest[method.len()..].starts_with('(') {
                        continue;
                    }
                    let actions = EC2_METHODS
                        .iter()
                        .find(|(m, _)| *m == method)
                        .unwrap_or_else(|| {
                            panic!("{}: unknown Ec2 method {method}", path.display())
                        })
                        .1;
                    used.extend(actions.iter().map(|a| format!("ec2:{a}")));
                }
            }
            for (i, _) in text.match_indices("ctx.elbv2.") {
                let rest = &text[i + "ctx.elbv2.".len()..];
                let method: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let action = METHODS
                    .iter()
                    .find(|(m, _)| *m == method)
                    .unwrap_or_else(|| {
                        panic!("{}: unknown ElbV2Api method {method}", path.display())
                    })
                    .1;
                used.insert(format!("elasticloadbalancing:{action}"));
            }
        }
    }
    // The ELBv2 client the Ingress, Service and binding drivers and the reaper call.
    for entry in std::fs::read_dir(repo_root().join("crates/aws-api/src/elbv2")).unwrap() {
        let text: String = std::fs::read_to_string(entry.unwrap().path())
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for (i, _) in text.match_indices(".call(\"") {
            let rest = &text[i + ".call(\"".len()..];
            let action: String = rest.chars().take_while(|c| *c != '"').collect();
            used.insert(format!("elasticloadbalancing:{action}"));
        }
    }
    // Tags given on create need AddTags as well.
    used.insert("elasticloadbalancing:AddTags".to_string());
    let policy: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/albc-iam-policy.json")).unwrap(),
    )
    .unwrap();
    let granted: BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().clone())
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(granted, used);
}
