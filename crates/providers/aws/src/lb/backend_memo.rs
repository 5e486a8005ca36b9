//! What the cluster's backend security group is known to be allowed into: node groups checked
//! (or given) the backend rule recently, so the next Service sync with nodes in the same groups
//! skips the security-group look-up. Pure; the caller holds it behind its lock.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

/// How long a check is trusted: a rule someone removed by hand is put back within this long
/// of the next sync (the same period as the instance listing).
pub const BACKEND_RULE_MEMO_TTL: Duration = Duration::from_secs(300);

/// The last checks of one backend group.
#[derive(Debug, Clone)]
pub struct BackendRuleMemo {
    backend: String,
    /// Security groups of instances whose node group was checked.
    instance_groups: BTreeSet<String>,
    /// Node groups that carry the backend rule.
    node_groups: BTreeSet<String>,
    /// When the oldest check still counted was made.
    since: Instant,
}

impl BackendRuleMemo {
    /// The node groups to remember for a load balancer whose instances sit in `instance_groups`,
    /// when every one of them was checked for `backend` within the TTL; `None` means look again.
    pub fn covered(
        memo: Option<&BackendRuleMemo>,
        backend: &str,
        instance_groups: &BTreeSet<String>,
        now: Instant,
    ) -> Option<BTreeSet<String>> {
        let memo = memo?;
        (memo.backend == backend
            && now.duration_since(memo.since) < BACKEND_RULE_MEMO_TTL
            && instance_groups.is_subset(&memo.instance_groups))
        .then(|| memo.node_groups.clone())
    }

    /// The memo after a check at `now` found (or made) the rule in `node_groups` for instances
    /// in `instance_groups`: merged into a fresh memo of the same backend, else started anew
    /// (an expired memo is dropped, so its age restarts only with a full check).
    pub fn after_check(
        memo: Option<BackendRuleMemo>,
        backend: &str,
        instance_groups: &BTreeSet<String>,
        node_groups: &BTreeSet<String>,
        now: Instant,
    ) -> BackendRuleMemo {
        match memo {
            Some(mut m)
                if m.backend == backend && now.duration_since(m.since) < BACKEND_RULE_MEMO_TTL =>
            {
                m.instance_groups.extend(instance_groups.iter().cloned());
                m.node_groups.extend(node_groups.iter().cloned());
                m
            }
            _ => BackendRuleMemo {
                backend: backend.to_string(),
                instance_groups: instance_groups.clone(),
                node_groups: node_groups.clone(),
                since: now,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_checked_group_is_covered_until_the_ttl() {
        let now = Instant::now();
        let memo =
            BackendRuleMemo::after_check(None, "sg-b", &set(&["sg-1"]), &set(&["sg-n"]), now);
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-b", &set(&["sg-1"]), now),
            Some(set(&["sg-n"]))
        );
        let later = now + BACKEND_RULE_MEMO_TTL;
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-b", &set(&["sg-1"]), later),
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_group_or_another_backend_is_looked_at() {
        let now = Instant::now();
        let memo =
            BackendRuleMemo::after_check(None, "sg-b", &set(&["sg-1"]), &set(&["sg-n"]), now);
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-b", &set(&["sg-1", "sg-2"]), now),
            None
        );
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-other", &set(&["sg-1"]), now),
            None
        );
        assert_eq!(BackendRuleMemo::covered(None, "sg-b", &set(&[]), now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn checks_merge_and_an_expired_memo_restarts() {
        let now = Instant::now();
        let memo =
            BackendRuleMemo::after_check(None, "sg-b", &set(&["sg-1"]), &set(&["sg-n"]), now);
        let memo =
            BackendRuleMemo::after_check(Some(memo), "sg-b", &set(&["sg-2"]), &set(&["sg-m"]), now);
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-b", &set(&["sg-1", "sg-2"]), now),
            Some(set(&["sg-m", "sg-n"]))
        );
        let later = now + BACKEND_RULE_MEMO_TTL;
        let memo = BackendRuleMemo::after_check(
            Some(memo),
            "sg-b",
            &set(&["sg-3"]),
            &set(&["sg-k"]),
            later,
        );
        assert_eq!(
            BackendRuleMemo::covered(Some(&memo), "sg-b", &set(&["sg-1"]), later),
            None
        );
    }
}
