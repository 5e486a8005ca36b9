//! The rule changes of one listener, as a pure function: a live rule that already sits at its
//! planned priority with the planned conditions and target group stays; every other live rule
//! is deleted first (priorities are unique per listener), then the missing ones are created.
//! A member appended to a group so costs one CreateRule, not a rewrite of the listener.

use std::collections::BTreeMap;

use crate::ingress::plan::RuleSpec;
use stratus_aws_api::elbv2::Rule;

/// What to change on one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChanges<'a> {
    /// Rule ARNs to delete.
    pub delete: Vec<String>,
    /// Planned rules to create, in priority order.
    pub create: Vec<&'a RuleSpec>,
    /// Live rules that stay.
    pub keep: Vec<Rule>,
}

/// Whether `have` is `want` (`tg_arns`: target group name → ARN).
fn same(have: &Rule, want: &RuleSpec, tg_arns: &BTreeMap<String, String>) -> bool {
    have.priority == want.priority
        && have.hosts == want.hosts
        && have.paths == want.paths
        && tg_arns.get(&want.target_group) == Some(&have.target_group)
}

/// The changes that turn `live` into `wanted`.
pub fn plan_rules<'a>(
    live: &[Rule],
    wanted: &'a [RuleSpec],
    tg_arns: &BTreeMap<String, String>,
) -> RuleChanges<'a> {
    let mut changes = RuleChanges {
        delete: Vec::new(),
        create: Vec::new(),
        keep: Vec::new(),
    };
    let mut kept = Vec::new();
    for have in live {
        match wanted.iter().find(|w| same(have, w, tg_arns)) {
            Some(w) if !kept.contains(&w.priority) => {
                kept.push(w.priority);
                changes.keep.push(have.clone());
            }
            _ => changes.delete.push(have.arn.clone()),
        }
    }
    changes.create = wanted
        .iter()
        .filter(|w| !kept.contains(&w.priority))
        .collect();
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(priority: i32, host: &str, tg: &str) -> RuleSpec {
        RuleSpec {
            priority,
            hosts: vec![host.into()],
            paths: vec!["/*".into()],
            target_group: tg.into(),
        }
    }

    fn live(arn: &str, priority: i32, host: &str, tg_arn: &str) -> Rule {
        Rule {
            arn: arn.into(),
            priority,
            hosts: vec![host.into()],
            paths: vec!["/*".into()],
            target_group: tg_arn.into(),
        }
    }

    fn arns() -> BTreeMap<String, String> {
        [("a", "arn-a"), ("b", "arn-b"), ("c", "arn-c")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_appended_rule_is_the_only_change() {
        let wanted = vec![want(1, "a", "a"), want(2, "b", "b"), want(3, "c", "c")];
        let have = vec![live("r1", 1, "a", "arn-a"), live("r2", 2, "b", "arn-b")];
        let c = plan_rules(&have, &wanted, &arns());
        assert!(c.delete.is_empty());
        assert_eq!(c.create, vec![&wanted[2]]);
        assert_eq!(c.keep, have);
    }

    #[test]
    fn an_insert_in_the_middle_moves_the_rules_after_it() {
        let wanted = vec![want(1, "a", "a"), want(2, "c", "c"), want(3, "b", "b")];
        let have = vec![live("r1", 1, "a", "arn-a"), live("r2", 2, "b", "arn-b")];
        let c = plan_rules(&have, &wanted, &arns());
        assert_eq!(c.delete, vec!["r2".to_string()]);
        assert_eq!(c.create, vec![&wanted[1], &wanted[2]]);
    }

    #[test]
    fn a_changed_target_group_or_a_removed_rule_is_deleted() {
        let wanted = vec![want(1, "a", "b")];
        let have = vec![live("r1", 1, "a", "arn-a"), live("r2", 2, "b", "arn-b")];
        let c = plan_rules(&have, &wanted, &arns());
        assert_eq!(c.delete, vec!["r1".to_string(), "r2".to_string()]);
        assert_eq!(c.create, vec![&wanted[0]]);
        assert!(c.keep.is_empty());
    }

    #[test]
    fn equal_sets_change_nothing_and_duplicates_go() {
        let wanted = vec![want(1, "a", "a")];
        let have = vec![live("r1", 1, "a", "arn-a"), live("dup", 1, "a", "arn-a")];
        let c = plan_rules(&have, &wanted, &arns());
        assert_eq!(c.delete, vec!["dup".to_string()]);
        assert!(c.create.is_empty());
    }
}
