//! `manage-security-groups` inside a load balancer's sync: the wanted rules and member ports
//! worked out from the request and the tree, reconciled only when they differ from what was
//! last reconciled (node churn without it costs nothing), and the groups of gone Services
//! removed by the reaper.

use std::collections::BTreeSet;

use stratus_cloud::{Cidr, CloudError, LoadBalancerRequest, ServiceRef};

use super::annotations::LbOptions;
use super::secgroups::{self, MemberPort};
use super::spec::MemberSpec;
use super::{invalid, OpenStackLoadBalancers};
use crate::provider_id::OpenStackProviderId;

/// The member ports of `members`: each target node's server (from its providerID) and address.
pub fn member_ports<'a>(
    request: &LoadBalancerRequest,
    members: impl IntoIterator<Item = &'a MemberSpec>,
) -> Vec<MemberPort> {
    let mut out: Vec<MemberPort> = members
        .into_iter()
        .filter_map(|m| {
            let node = request.nodes.iter().find(|n| n.name == m.name)?;
            let id = OpenStackProviderId::parse(&node.provider_id).ok()?;
            Some(MemberPort {
                server: id.server,
                address: m.address.clone(),
            })
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    out.sort();
    out
}

impl OpenStackLoadBalancers {
    /// The member subnet's CIDR: `member-subnet-id`, else the VIP subnet, else the subnet
    /// holding the first member.
    async fn member_cidr(
        &self,
        options: &LbOptions,
        vip_subnet: Option<&str>,
        first_member: Option<&str>,
    ) -> Result<String, CloudError> {
        let subnets = self.subnets.get_or_try_init(|| self.fips.subnets()).await?;
        if let Some(id) = options.member_subnet_id.as_deref().or(vip_subnet) {
            return subnets
                .iter()
                .find(|(s, _)| s == id)
                .map(|(_, cidr)| cidr.clone())
                .ok_or_else(|| invalid(format!("subnet {id} (member subnet) not found")));
        }
        let address =
            first_member.ok_or_else(|| invalid("no member subnet to open the node ports from"))?;
        let ip: std::net::IpAddr = address.parse().map_err(invalid)?;
        subnets
            .iter()
            .find(|(_, cidr)| Cidr::parse(cidr).is_ok_and(|c| c.contains_ip(ip)))
            .map(|(_, cidr)| cidr.clone())
            .ok_or_else(|| invalid(format!("no subnet holds node address {address}")))
    }

    /// With `manage-security-groups`: the Service's group holds the rules for its node ports and
    /// sits on the member ports of `members` (and no other).
    pub(super) async fn sync_security_group<'a>(
        &self,
        request: &LoadBalancerRequest,
        options: &LbOptions,
        name: &str,
        vip_subnet: Option<&str>,
        members: impl IntoIterator<Item = &'a MemberSpec> + Clone,
    ) -> Result<(), CloudError> {
        if !self.config.manage_security_groups {
            return Ok(());
        }
        let first = members
            .clone()
            .into_iter()
            .next()
            .map(|m| m.address.clone());
        let cidr = self
            .member_cidr(options, vip_subnet, first.as_deref())
            .await?;
        let rules = secgroups::wanted_rules(request, &cidr, &self.config.lb_provider);
        let ports = member_ports(request, members);
        let want = (rules, ports);
        if self.recall(name).and_then(|k| k.sg).as_ref() == Some(&want) {
            return Ok(());
        }
        self.sgs
            .reconcile(
                &request.cluster_name,
                &request.service,
                &want.0,
                &want.1,
                options.member_subnet_id.as_deref(),
            )
            .await?;
        self.remember(name, |k| k.sg = Some(want));
        Ok(())
    }

    /// Removes the Service's group, whether `manage-security-groups` is on or not (as OCCM: a
    /// group made before the option was turned off is not orphaned).
    pub(super) async fn remove_security_group(
        &self,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        self.sgs.remove(service).await
    }

    /// Removes the groups of this cluster's Services that are gone (a Service made again under
    /// the same name has a new UID, so a new group), whether the option is on or not; how many.
    pub(super) async fn reap_security_groups(
        &self,
        cluster: &str,
        live: &[ServiceRef],
    ) -> Result<usize, CloudError> {
        let live: BTreeSet<String> = live.iter().map(secgroups::group_name).collect();
        let mut reaped = 0;
        for group in self.sgs.all().await? {
            let name = group["name"].as_str().unwrap_or_default();
            if !secgroups::is_ours(cluster, &group) || live.contains(name) {
                continue;
            }
            let id = group["id"].as_str().unwrap_or_default();
            tracing::info!(group = %id, name = %name, "removing the security group of a vanished Service");
            self.sgs.remove_group(id).await?;
            reaped += 1;
        }
        Ok(reaped)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use stratus_cloud::{NodeAddress, NodeAddressType, TargetNode};

    use super::*;

    #[test]
    fn member_ports_come_from_provider_ids() {
        let node = |name: &str, pid: &str| TargetNode {
            name: name.into(),
            provider_id: pid.into(),
            labels: BTreeMap::new(),
            addresses: vec![NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.9")],
        };
        let request = LoadBalancerRequest {
            cluster_name: "c".into(),
            service: ServiceRef {
                namespace: "ns".into(),
                name: "web".into(),
                uid: "u".into(),
            },
            ports: vec![],
            annotations: BTreeMap::new(),
            source_ranges: vec![],
            local_traffic_only: false,
            health_check_node_port: None,
            requested_ip: None,
            external_ips: vec![],
            load_balancer_class: None,
            nodes: vec![
                node("a", "openstack:///srv-a"),
                node("b", "openstack://RegionOne/srv-b"),
                node("c", "aws:///i-1"),
            ],
        };
        let m = |name: &str, address: &str, port: u16| MemberSpec {
            address: address.into(),
            port,
            name: name.into(),
            subnet_id: None,
            monitor_port: None,
        };
        let members = [
            m("b", "10.0.0.3", 30080),
            m("a", "10.0.0.2", 30080),
            m("a", "10.0.0.2", 30053),
            m("c", "10.0.0.4", 30080),
            m("gone", "10.0.0.5", 30080),
        ];
        assert_eq!(
            member_ports(&request, &members),
            vec![
                MemberPort {
                    server: "srv-a".into(),
                    address: "10.0.0.2".into()
                },
                MemberPort {
                    server: "srv-b".into(),
                    address: "10.0.0.3".into()
                },
            ]
        );
    }
}
