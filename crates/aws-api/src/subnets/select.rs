//! Choosing the subnets of a load balancer: one per zone, by tags, as upstream discovers them.

use std::collections::BTreeMap;

/// Tag marking subnets for internet-facing load balancers.
pub const ROLE_ELB: &str = "kubernetes.io/role/elb";
/// Tag marking subnets for internal load balancers.
pub const ROLE_INTERNAL_ELB: &str = "kubernetes.io/role/internal-elb";
use stratus_cloud::tags::CLUSTER_TAG_PREFIX;

/// What selection needs to know of one subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetInfo {
    /// The subnet ID.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// Whether its route table sends 0.0.0.0/0 to an internet gateway.
    pub public: bool,
    /// Its IPv4 CIDR block (empty when unknown).
    pub cidr: String,
}

impl SubnetInfo {
    fn tagged_for(&self, cluster_id: &str) -> bool {
        self.tags
            .contains_key(&format!("{CLUSTER_TAG_PREFIX}{cluster_id}"))
    }

    fn tagged_for_another_cluster(&self, cluster_id: &str) -> bool {
        !self.tagged_for(cluster_id) && self.tags.keys().any(|k| k.starts_with(CLUSTER_TAG_PREFIX))
    }

    /// A role tag counts when present with an empty value or `1` (as upstream).
    fn has_role(&self, role: &str) -> bool {
        self.tags
            .get(role)
            .is_some_and(|v| v.is_empty() || v == "1")
    }
}

/// One subnet per zone, sorted by zone.
///
/// Candidates: subnets not tagged for another cluster; for an internet-facing load balancer
/// only public ones. Within a zone the winner has the role tag, then our cluster tag, then the
/// smallest ID — so the choice is stable across reconciles.
pub fn select_subnets(subnets: &[SubnetInfo], cluster_id: &str, internal: bool) -> Vec<String> {
    let role = if internal {
        ROLE_INTERNAL_ELB
    } else {
        ROLE_ELB
    };
    let mut best: BTreeMap<&str, &SubnetInfo> = BTreeMap::new();
    let rank = |s: &SubnetInfo| (!s.has_role(role), !s.tagged_for(cluster_id));
    for s in subnets {
        if s.tagged_for_another_cluster(cluster_id) || (!internal && !s.public) {
            continue;
        }
        match best.get(s.zone.as_str()) {
            Some(cur) if (rank(cur), cur.id.as_str()) <= (rank(s), s.id.as_str()) => {}
            _ => {
                best.insert(&s.zone, s);
            }
        }
    }
    best.values().map(|s| s.id.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, public: bool, tags: &[&str]) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            zone: zone.into(),
            public,
            cidr: String::new(),
            tags: tags
                .iter()
                .map(|t| (t.to_string(), "1".to_string()))
                .collect(),
        }
    }

    #[test]
    fn one_subnet_per_zone_with_the_upstream_tie_break() {
        let mine = "kubernetes.io/cluster/c1";
        let subnets = vec![
            subnet("subnet-b", "us-east-1a", true, &[]),
            subnet("subnet-a", "us-east-1a", true, &[]),
            subnet("subnet-c", "us-east-1a", true, &[mine]),
            subnet("subnet-z", "us-east-1b", true, &[ROLE_ELB]),
            subnet("subnet-y", "us-east-1b", true, &[mine]),
            subnet(
                "subnet-x",
                "us-east-1c",
                true,
                &["kubernetes.io/cluster/other"],
            ),
            subnet("subnet-p", "us-east-1c", false, &[mine]),
        ];
        // 1a: cluster tag beats lexicographic; 1b: role beats cluster tag;
        // 1c: other cluster's subnet excluded, private one not usable for internet-facing.
        assert_eq!(
            select_subnets(&subnets, "c1", false),
            vec!["subnet-c", "subnet-z"]
        );
        // Internal load balancers may use private subnets.
        assert_eq!(
            select_subnets(&subnets, "c1", true),
            vec!["subnet-c", "subnet-y", "subnet-p"]
        );
    }

    #[test]
    fn ties_fall_back_to_the_smallest_id_regardless_of_order() {
        let a = vec![
            subnet("subnet-2", "z", true, &[]),
            subnet("subnet-1", "z", true, &[]),
        ];
        let b: Vec<SubnetInfo> = a.iter().rev().cloned().collect();
        assert_eq!(select_subnets(&a, "c", false), vec!["subnet-1"]);
        assert_eq!(select_subnets(&b, "c", false), vec!["subnet-1"]);
    }

    #[test]
    fn role_tag_with_other_value_does_not_count() {
        let mut s = subnet("subnet-9", "z", true, &[]);
        s.tags.insert(ROLE_ELB.into(), "0".into());
        let other = subnet("subnet-1", "z", true, &[]);
        assert_eq!(select_subnets(&[s, other], "c", false), vec!["subnet-1"]);
    }
}
