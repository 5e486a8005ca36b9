//! The managed frontend security group of a load balancer that names none (an ALB without
//! `alb.ingress.kubernetes.io/security-groups`, an NLB without
//! `service.beta.kubernetes.io/aws-load-balancer-security-groups`): one group per load
//! balancer, named like it and tagged with its stack tags, allowing the listener ports from
//! `inbound-cidrs` or the source ranges (default `0.0.0.0/0`) plus ICMP "fragmentation needed"
//! (the CCM's listener rule set); its rules are diffed against AWS and changed only where they
//! differ; it is deleted after the load balancer.

use std::collections::{BTreeMap, BTreeSet};

use stratus_aws_api::sg_rules::{diff, listener_rules, source_ranges, CidrRule};
use stratus_aws_api::Ec2;
use stratus_cloud::CloudError;

use crate::ingress::plan::AlbSpec;

/// Tag value of the resource tag on the managed group.
pub const RESOURCE: &str = "ManagedLBSecurityGroup";

/// Which stack a managed group belongs to and how its tags say so.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// The stack tag key (`ingress.k8s.aws/stack`, `service.k8s.aws/stack`).
    pub stack_key: &'a str,
    /// The resource tag key (`ingress.k8s.aws/resource`, `service.k8s.aws/resource`).
    pub resource_key: &'a str,
    /// The stack's tags (cluster and stack).
    pub stack: &'a BTreeMap<String, String>,
}

impl<'a> Owner<'a> {
    /// An Ingress group's stack.
    pub fn ingress(stack: &'a BTreeMap<String, String>) -> Self {
        Owner {
            stack_key: crate::ingress::tags::STACK_TAG,
            resource_key: crate::ingress::tags::RESOURCE_TAG,
            stack,
        }
    }
}

/// The rules the managed group of `spec` must hold (pure).
pub fn wanted_rules(spec: &AlbSpec) -> BTreeSet<CidrRule> {
    let ports: BTreeSet<u16> = spec
        .listeners
        .iter()
        .filter_map(|l| u16::try_from(l.port.port).ok())
        .collect();
    let ports: Vec<u16> = ports.into_iter().collect();
    listener_rules(&ports, &source_ranges(&spec.inbound_cidrs))
}

/// Finds or creates the managed group `name` of `owner` (tagged `tags` plus the resource tag)
/// in `vpc` and makes its rules `wanted`; returns its ID. A group found by its tags is reused,
/// so a restart or a retried reconcile never makes a second one.
pub async fn ensure(
    ec2: &Ec2,
    vpc: &str,
    name: &str,
    wanted: &BTreeSet<CidrRule>,
    owner: Owner<'_>,
    tags: &BTreeMap<String, String>,
) -> Result<String, CloudError> {
    let (id, current) = match find(ec2, owner).await? {
        Some(g) => (g.id, g.cidr_rules),
        None => {
            let mut t = tags.clone();
            t.insert(owner.resource_key.into(), RESOURCE.into());
            let description = format!("[k8s] Managed SecurityGroup for LoadBalancer {name}");
            let id = ec2
                .create_security_group(vpc, name, &description, &t)
                .await?;
            (id, BTreeSet::new())
        }
    };
    let (add, remove) = diff(&current, wanted);
    ec2.update_cidr_rules(&id, &add, &remove).await?;
    Ok(id)
}

/// Deletes the managed group of the stack, if there is one (after its load balancer is gone).
pub async fn remove(ec2: &Ec2, owner: Owner<'_>) -> Result<(), CloudError> {
    if let Some(g) = find(ec2, owner).await? {
        ec2.delete_security_group(&g.id).await?;
    }
    Ok(())
}

/// The managed group of the stack: tagged with its stack and cluster tags and the resource tag
/// (one DescribeSecurityGroups, filtered by EC2).
async fn find(
    ec2: &Ec2,
    owner: Owner<'_>,
) -> Result<Option<stratus_aws_api::ec2::SecurityGroup>, CloudError> {
    let Some(stack_value) = owner.stack.get(owner.stack_key) else {
        return Ok(None);
    };
    let groups = ec2
        .security_groups_tagged(owner.stack_key, Some((owner.stack_key, stack_value)))
        .await?;
    Ok(groups.into_iter().find(|g| {
        owner.stack.iter().all(|(k, v)| g.tags.get(k) == Some(v))
            && g.tags.get(owner.resource_key).map(String::as_str) == Some(RESOURCE)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingress::plan::ListenerSpec;

    fn spec(ports: &[i32], cidrs: &[&str]) -> AlbSpec {
        AlbSpec {
            internet_facing: true,
            listeners: ports
                .iter()
                .map(|p| ListenerSpec::on(*p, *p == 443, &[]))
                .collect(),
            inbound_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
            ..AlbSpec::empty()
        }
    }

    #[test]
    fn listener_ports_are_open_to_everyone_by_default() {
        let rules = wanted_rules(&spec(&[80, 443], &[]));
        let tcp: Vec<(i32, &str)> = rules
            .iter()
            .filter(|r| r.protocol == "tcp")
            .map(|r| (r.from, r.cidr.as_str()))
            .collect();
        assert_eq!(tcp, vec![(80, "0.0.0.0/0"), (443, "0.0.0.0/0")]);
        assert!(rules.iter().any(|r| r.protocol == "icmp"));
    }

    #[test]
    fn inbound_cidrs_replace_everyone_and_are_normalised() {
        let rules = wanted_rules(&spec(&[80], &["10.0.0.1/8", "192.168.0.0/16"]));
        let tcp: BTreeSet<&str> = rules
            .iter()
            .filter(|r| r.protocol == "tcp")
            .map(|r| r.cidr.as_str())
            .collect();
        assert_eq!(tcp, BTreeSet::from(["10.0.0.0/8", "192.168.0.0/16"]));
    }

    #[test]
    fn a_listener_change_adds_and_removes_only_the_difference() {
        let before = wanted_rules(&spec(&[80], &[]));
        let after = wanted_rules(&spec(&[80, 8443], &[]));
        let (add, remove) = diff(&before, &after);
        assert_eq!(add.len(), 1);
        assert_eq!(add[0].from, 8443);
        assert!(remove.is_empty());
    }
}
