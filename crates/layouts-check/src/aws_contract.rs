//! The AWS layouts' contract with what runs on the cluster, checked statically (the AWS provider
//! cannot be installed here): subnets carry the role tags and the cluster tag the CCM's
//! load-balancer subnet discovery ranks by, route tables and instances the cluster tag its route
//! controller and instance cache list by, exactly one security group per node the cluster tag
//! (the node group, the one the CCM adds load-balancer rules to), instances the node-termination-handler's
//! managed tag and IMDSv2 reachable from pods (hop limit 2, for the EBS CSI node plugin and the
//! termination handler), and the masters' role the policy of `deploy/iam-policy.json`.
//!
//! The tag *values* come from the provider-free `cluster-config` module; the tests evaluate it
//! with `tofu` and hold the result against the CCM's own constants and subnet selection.

use std::path::Path;

use hcl::Expression;

use crate::catalog::{layout_module_dir, shared_module_dir};
use crate::module::{attr_expr, blocks, Module};
use crate::structure::Problem;

/// The IAM policy file the masters' role carries, inside `terraform-modules/iam`.
pub const CCM_POLICY_FILE: &str = "cloud-controller-manager-policy.json";

/// Every contract problem of the AWS layouts under `root` (`layouts/`).
pub fn check(root: &Path, layouts: &[&str]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let load = |dir: std::path::PathBuf, problems: &mut Vec<Problem>| match Module::load(&dir) {
        Ok(m) => Some(m),
        Err(e) => {
            problems.push(p(&dir, "", e.to_string()));
            None
        }
    };
    if let Some(m) = load(shared_module_dir(root, "aws", "network"), &mut problems) {
        check_network(&m, &mut problems);
    }
    if let Some(m) = load(
        shared_module_dir(root, "aws", "security-groups"),
        &mut problems,
    ) {
        check_security_groups(&m, &mut problems);
    }
    if let Some(m) = load(shared_module_dir(root, "aws", "node"), &mut problems) {
        check_node(&m, &mut problems);
    }
    if let Some(m) = load(shared_module_dir(root, "aws", "iam"), &mut problems) {
        check_iam(&m, &mut problems);
    }
    for layout in layouts {
        if let Some(m) = load(
            layout_module_dir(root, "aws", layout, "base-infrastructure"),
            &mut problems,
        ) {
            check_args(
                &m,
                "network",
                &[
                    ("tags", "module.config.tags"),
                    ("cluster_tags", "module.config.cluster_tags"),
                    ("public_subnet_tags", "module.config.public_subnet_tags"),
                    ("internal_subnet_tags", "module.config.internal_subnet_tags"),
                ],
                &mut problems,
            );
            check_args(
                &m,
                "security-groups",
                &[
                    ("cluster_tags", "module.config.cluster_tags"),
                    ("tags", "module.config.tags"),
                    (
                        "public_network_allow_list",
                        "module.config.public_network_allow_list",
                    ),
                ],
                &mut problems,
            );
        }
        for (kind, call, profile) in [
            ("master-node", "master-node", "-master\""),
            ("static-node", "static-node", "-node\""),
        ] {
            if let Some(m) = load(layout_module_dir(root, "aws", layout, kind), &mut problems) {
                check_args(
                    &m,
                    call,
                    &[
                        ("instance_tags", "module.config.instance_tags"),
                        ("volume_tags", "module.config.cluster_tags"),
                    ],
                    &mut problems,
                );
                let groups = m
                    .module_call(call)
                    .and_then(|c| c.args.get("security_group_ids"))
                    .cloned()
                    .unwrap_or_default();
                if !groups.starts_with("concat(data.aws_security_group.node[*].id")
                    && groups != "data.aws_security_group.node[*].id"
                {
                    problems.push(p(
                        &m.dir,
                        &format!("module {call}"),
                        format!("security_group_ids must start with the node group, got {groups}"),
                    ));
                }
                let profile_arg = m
                    .module_call(call)
                    .and_then(|c| c.args.get("iam_instance_profile"))
                    .cloned()
                    .unwrap_or_default();
                if !profile_arg.ends_with(profile) {
                    problems.push(p(
                        &m.dir,
                        &format!("module {call}"),
                        format!(
                            "iam_instance_profile must be the {profile} profile, got {profile_arg}"
                        ),
                    ));
                }
            }
        }
    }
    problems
}

/// Subnets carry the role tags, route tables the configured or the cluster tags.
fn check_network(m: &Module, problems: &mut Vec<Problem>) {
    for r in m.resources_of("aws_subnet") {
        let want = format!(
            "var.{}_subnet_tags",
            r.name.strip_prefix("kube_").unwrap_or(&r.name)
        );
        if !r.attr("tags").unwrap_or_default().contains(&want) {
            problems.push(p(
                &m.dir,
                &format!("aws_subnet.{}", r.name),
                format!("tags must include {want}"),
            ));
        }
    }
    for r in m.resources_of("aws_route_table") {
        let tags = r.attr("tags").unwrap_or_default();
        if !["var.tags", "var.cluster_tags", "local.nodes_table_tags"]
            .iter()
            .any(|t| tags.contains(t))
        {
            problems.push(p(
                &m.dir,
                &format!("aws_route_table.{}", r.name),
                "tags must include var.cluster_tags or var.tags".into(),
            ));
        }
    }
    if m.resources_of("aws_subnet").len() < 2 {
        problems.push(p(
            &m.dir,
            "aws_subnet",
            "public and private subnets are expected".into(),
        ));
    }
}

/// Exactly one security group carries the cluster tag.
fn check_security_groups(m: &Module, problems: &mut Vec<Problem>) {
    let groups = m.resources_of("aws_security_group");
    let tagged: Vec<&str> = groups
        .iter()
        .filter(|r| {
            r.attr("tags")
                .unwrap_or_default()
                .contains("var.cluster_tags")
        })
        .map(|r| r.name.as_str())
        .collect();
    if tagged.len() != 1 {
        problems.push(p(
            &m.dir,
            "aws_security_group",
            format!(
                "exactly one group must carry the cluster tag (var.cluster_tags), found {tagged:?}"
            ),
        ));
    }
    for r in &groups {
        let tags = r.attr("tags").unwrap_or_default();
        if !tags.contains("var.cluster_tags") && !tags.contains("var.tags") {
            problems.push(p(
                &m.dir,
                &format!("aws_security_group.{}", r.name),
                "tags must be var.cluster_tags or var.tags".into(),
            ));
        }
    }
}

/// Instances: cluster and termination-handler tags, IMDSv2 with hop limit 2, no source/dest check.
fn check_node(m: &Module, problems: &mut Vec<Problem>) {
    let instances = m.resources_of("aws_instance");
    if instances.is_empty() {
        problems.push(p(&m.dir, "aws_instance", "is missing".into()));
    }
    for r in instances {
        let at = format!("aws_instance.{}", r.name);
        if !r
            .attr("tags")
            .unwrap_or_default()
            .contains("var.instance_tags")
        {
            problems.push(p(&m.dir, &at, "tags must include var.instance_tags".into()));
        }
        let root_tags = blocks(&r.body, "root_block_device")
            .next()
            .and_then(|b| attr_expr(&b.body, "tags"))
            .map(|e| e.to_string())
            .unwrap_or_default();
        if !root_tags.contains("var.volume_tags") {
            problems.push(p(
                &m.dir,
                &at,
                "root_block_device.tags must include var.volume_tags".into(),
            ));
        }
        if r.attr("source_dest_check").as_deref() != Some("false") {
            problems.push(p(
                &m.dir,
                &at,
                "source_dest_check must be false (pod routes)".into(),
            ));
        }
        let metadata = blocks(&r.body, "metadata_options").next();
        let tokens = metadata.and_then(|b| attr_expr(&b.body, "http_tokens"));
        let hops = metadata
            .and_then(|b| attr_expr(&b.body, "http_put_response_hop_limit"))
            .and_then(|e| match e {
                Expression::Number(n) => n.as_u64(),
                _ => None,
            });
        if !matches!(tokens, Some(Expression::String(s)) if s == "required") {
            problems.push(p(
                &m.dir,
                &at,
                "metadata_options.http_tokens must be \"required\" (IMDSv2)".into(),
            ));
        }
        if hops.is_none_or(|h| h < 2) {
            problems.push(p(
                &m.dir,
                &at,
                "metadata_options.http_put_response_hop_limit must be at least 2: the EBS CSI node plugin and the node-termination-handler read IMDS from pods".into(),
            ));
        }
    }
    for r in m.resources_of("aws_ebs_volume") {
        if !r
            .attr("tags")
            .unwrap_or_default()
            .contains("var.volume_tags")
        {
            problems.push(p(
                &m.dir,
                &format!("aws_ebs_volume.{}", r.name),
                "tags must include var.volume_tags".into(),
            ));
        }
    }
}

/// The masters' role carries the CCM policy file, and the masters' profile that role.
fn check_iam(m: &Module, problems: &mut Vec<Problem>) {
    let want = format!("file(\"${{path.module}}/{CCM_POLICY_FILE}\")");
    let policy = m
        .resources_of("aws_iam_role_policy")
        .into_iter()
        .find(|r| r.attr("policy").as_deref() == Some(want.as_str()));
    match policy {
        Some(r) if r.attr("role").as_deref() == Some("aws_iam_role.master.id") => {}
        Some(r) => problems.push(p(
            &m.dir,
            &format!("aws_iam_role_policy.{}", r.name),
            "must be attached to aws_iam_role.master".into(),
        )),
        None => problems.push(p(
            &m.dir,
            "aws_iam_role_policy",
            format!("no policy reads {CCM_POLICY_FILE}"),
        )),
    }
    let profile_ok = m.resources_of("aws_iam_instance_profile").iter().any(|r| {
        r.name == "master" && r.attr("role").as_deref() == Some("aws_iam_role.master.name")
    });
    if !profile_ok {
        problems.push(p(
            &m.dir,
            "aws_iam_instance_profile.master",
            "must carry aws_iam_role.master".into(),
        ));
    }
}

/// Arguments of a module call that must be exactly these expressions.
fn check_args(m: &Module, call: &str, want: &[(&str, &str)], problems: &mut Vec<Problem>) {
    let Some(c) = m.module_call(call) else {
        problems.push(p(&m.dir, &format!("module {call}"), "is missing".into()));
        return;
    };
    for (arg, expr) in want {
        if c.args.get(*arg).map(String::as_str) != Some(*expr) {
            problems.push(p(
                &m.dir,
                &format!("module {call}"),
                format!("{arg} must be {expr}, got {:?}", c.args.get(*arg)),
            ));
        }
    }
}

/// Whether two IAM policy documents are the same JSON (order of keys aside).
pub fn same_policy(a: &str, b: &str) -> Result<bool, serde_json::Error> {
    let a: serde_json::Value = serde_json::from_str(a)?;
    let b: serde_json::Value = serde_json::from_str(b)?;
    Ok(a == b)
}

fn p(dir: &Path, item: &str, message: String) -> Problem {
    Problem {
        place: if item.is_empty() {
            dir.display().to_string()
        } else {
            format!("{} ({item})", dir.display())
        },
        message,
    }
}
