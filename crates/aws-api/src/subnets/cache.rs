//! Subnets for load balancers: a short-lived per-VPC view (so 100 Services created at once cost
//! two EC2 calls, not two hundred) and the choice by annotation or by tags.

use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

use stratus_cloud::CloudError;
use tokio::sync::Mutex;

use crate::ec2::Ec2;
use crate::subnets::select::{select_subnets, SubnetInfo};

/// How long a subnet listing is reused.
pub const SUBNET_TTL: Duration = Duration::from_secs(60);

/// The cached subnet listing of the cluster VPC.
pub struct SubnetCache {
    ec2: Ec2,
    ttl: Duration,
    /// Held across the refresh, so concurrent reconciles share one listing.
    entry: Mutex<Option<(Instant, String, Vec<SubnetInfo>)>>,
}

impl SubnetCache {
    /// An empty cache.
    pub fn new(ec2: Ec2) -> Self {
        Self {
            ec2,
            ttl: SUBNET_TTL,
            entry: Mutex::new(None),
        }
    }

    /// The EC2 calls the cache lists with (shared with other load-balancer EC2 work).
    pub fn ec2(&self) -> &Ec2 {
        &self.ec2
    }

    /// Subnets of `vpc`, listed at most once per TTL.
    pub async fn subnets(&self, vpc: &str) -> Result<Vec<SubnetInfo>, CloudError> {
        let mut entry = self.entry.lock().await;
        if let Some((at, cached_vpc, list)) = entry.as_ref() {
            if cached_vpc == vpc && at.elapsed() < self.ttl {
                return Ok(list.clone());
            }
        }
        let list = self.ec2.vpc_subnets(vpc).await?;
        *entry = Some((Instant::now(), vpc.to_string(), list.clone()));
        Ok(list)
    }

    /// Forgets the listing (after a choice failed, the next try looks again).
    pub async fn invalidate(&self) {
        *self.entry.lock().await = None;
    }
}

/// The subnets of a load balancer: the annotated ones (IDs or `Name` tags), or one per zone by
/// the upstream tag rules. An empty choice is an error that says what to tag.
pub fn choose_subnets(
    all: &[SubnetInfo],
    annotated: &[String],
    cluster_id: &str,
    internal: bool,
) -> Result<Vec<String>, String> {
    if !annotated.is_empty() {
        let mut out = BTreeSet::new();
        for want in annotated {
            let found = all
                .iter()
                .find(|s| &s.id == want || s.tags.get("Name") == Some(want));
            match found {
                Some(s) => {
                    out.insert(s.id.clone());
                }
                None => {
                    return Err(format!(
                        "subnet {want:?} from the subnets annotation is not in the cluster VPC"
                    ))
                }
            }
        }
        return Ok(out.into_iter().collect());
    }
    let chosen = select_subnets(all, cluster_id, internal);
    if chosen.is_empty() {
        return Err(format!(
            "no suitable subnets for an {} load balancer: tag subnets with {} (public ones need a route to an internet gateway)",
            if internal { "internal" } else { "internet-facing" },
            if internal {
                crate::subnets::select::ROLE_INTERNAL_ELB
            } else {
                crate::subnets::select::ROLE_ELB
            }
        ));
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn subnet(id: &str, zone: &str, name: &str, public: bool) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            zone: zone.into(),
            tags: BTreeMap::from([("Name".to_string(), name.to_string())]),
            public,
            cidr: String::new(),
        }
    }

    #[test]
    fn annotated_subnets_resolve_by_id_or_name() {
        let all = [
            subnet("subnet-1", "a", "one", true),
            subnet("subnet-2", "b", "two", false),
        ];
        assert_eq!(
            choose_subnets(&all, &["two".into(), "subnet-1".into()], "c", false).unwrap(),
            vec!["subnet-1", "subnet-2"]
        );
        assert!(choose_subnets(&all, &["three".into()], "c", false)
            .unwrap_err()
            .contains("three"));
    }

    #[test]
    fn nothing_suitable_says_what_to_tag() {
        let all = [subnet("subnet-2", "b", "two", false)];
        let e = choose_subnets(&all, &[], "c", false).unwrap_err();
        assert!(e.contains("kubernetes.io/role/elb"), "{e}");
        assert_eq!(
            choose_subnets(&all, &[], "c", true).unwrap(),
            vec!["subnet-2"]
        );
    }
}
