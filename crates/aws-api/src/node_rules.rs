//! Ingress rules on the nodes' security groups that let load balancers reach them: one rule per
//! node group from the cluster's backend group, described so it can be found again and removed.

use std::collections::{BTreeMap, BTreeSet};

use crate::ec2::SecurityGroup;
use crate::sg_rules::GroupRule;
use crate::tags::cluster_tag_key;

/// The rule letting every packet from `source_group` in.
pub fn allow_all_from(source_group: &str, description: &str) -> GroupRule {
    GroupRule {
        protocol: "-1".into(),
        from: -1,
        to: -1,
        source_group: source_group.into(),
        description: description.into(),
    }
}

/// Whether `group` already lets `rule`'s source in with the same protocol (the description is
/// not compared: a rule someone else described differently still does the job).
pub fn has_rule(group: &SecurityGroup, rule: &GroupRule) -> bool {
    group
        .group_rules
        .iter()
        .any(|r| r.source_group == rule.source_group && r.protocol == rule.protocol)
}

/// The group of one instance that receives load-balancer rules: the one tagged for the cluster,
/// else its only group (as upstream). Several candidates are an error naming them.
pub fn node_group_of(
    instance_groups: &[String],
    known: &BTreeMap<String, SecurityGroup>,
    cluster_id: &str,
) -> Result<Option<String>, String> {
    let key = cluster_tag_key(cluster_id);
    let tagged: Vec<&String> = instance_groups
        .iter()
        .filter(|g| known.get(*g).is_some_and(|sg| sg.tags.contains_key(&key)))
        .collect();
    match tagged.as_slice() {
        [one] => return Ok(Some((*one).clone())),
        [] => {}
        many => {
            return Err(format!(
                "instance has several security groups tagged {key}: {many:?}; tag exactly one"
            ))
        }
    }
    match instance_groups {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        many => Err(format!(
            "instance has several security groups and none is tagged {key}: {many:?}; tag the one for load-balancer rules"
        )),
    }
}

/// Node groups for a set of instances (each instance's group list), errors listed together.
pub fn node_groups(
    instances: &[Vec<String>],
    known: &BTreeMap<String, SecurityGroup>,
    cluster_id: &str,
) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    let mut problems = BTreeSet::new();
    for groups in instances {
        match node_group_of(groups, known, cluster_id) {
            Ok(Some(g)) => {
                out.insert(g);
            }
            Ok(None) => {}
            Err(e) => {
                problems.insert(e);
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems.into_iter().collect::<Vec<_>>().join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sg(id: &str, tagged: bool) -> (String, SecurityGroup) {
        let mut g = SecurityGroup {
            id: id.into(),
            ..SecurityGroup::default()
        };
        if tagged {
            g.tags.insert(cluster_tag_key("c"), "owned".into());
        }
        (id.to_string(), g)
    }

    #[test]
    fn tagged_group_wins_then_the_only_group() {
        let known = BTreeMap::from([sg("sg-a", true), sg("sg-b", false), sg("sg-c", false)]);
        let pick = |gs: &[&str]| {
            node_group_of(
                &gs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &known,
                "c",
            )
        };
        assert_eq!(pick(&["sg-b", "sg-a"]).unwrap().as_deref(), Some("sg-a"));
        assert_eq!(pick(&["sg-b"]).unwrap().as_deref(), Some("sg-b"));
        assert_eq!(pick(&[]).unwrap(), None);
        assert!(pick(&["sg-b", "sg-c"])
            .unwrap_err()
            .contains("none is tagged"));
    }

    #[test]
    fn existing_rule_is_recognised_by_source_and_protocol() {
        let rule = allow_all_from("sg-lb", "lb1");
        let (_, mut g) = sg("sg-node", false);
        assert!(!has_rule(&g, &rule));
        g.group_rules.insert(GroupRule {
            description: String::new(),
            ..rule.clone()
        });
        assert!(has_rule(&g, &rule));
    }
}
