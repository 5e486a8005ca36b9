//! `manage-security-groups`, as OCCM does it, as pure decisions: one security group per Service
//! named `lb-sg-<uid>-<namespace>-<name>` (described `Security Group for <ns>/<name> Service
//! LoadBalancer in cluster <cluster>`), ingress rules opening each node port (and the health
//! check node port) from the member subnet (from the allowed source ranges with the `ovn`
//! provider, which keeps the client's address), attached to the one port of each member node that
//! carries the member address. The I/O is in [`super::sg_neutron`].

use std::collections::BTreeSet;

use serde_json::Value;
use stratus_cloud::{LoadBalancerRequest, Protocol, ServiceRef};

use super::names::MAX_NAME;

/// One ingress rule we manage: `protocol` to `port` from `remote_ip_prefix`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleSpec {
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// `IPv4` or `IPv6`.
    pub ethertype: &'static str,
    /// Source CIDR.
    pub remote_ip_prefix: String,
    /// Node port (`port_range_min` = `port_range_max`).
    pub port: u16,
}

fn cut(s: String) -> String {
    match s.char_indices().nth(MAX_NAME) {
        Some((at, _)) => s[..at].to_owned(),
        None => s,
    }
}

/// OCCM's group name: `lb-sg-<uid>-<namespace>-<name>` (at most 255 characters).
pub fn group_name(service: &ServiceRef) -> String {
    cut(format!(
        "lb-sg-{}-{}-{}",
        service.uid, service.namespace, service.name
    ))
}

/// OCCM's group description.
pub fn group_description(cluster: &str, service: &ServiceRef) -> String {
    cut(format!(
        "Security Group for {}/{} Service LoadBalancer in cluster {cluster}",
        service.namespace, service.name
    ))
}

/// Whether a group is one of `cluster`'s Service groups (by its description and name prefix).
pub fn is_ours(cluster: &str, group: &Value) -> bool {
    let name = group["name"].as_str().unwrap_or_default();
    let description = group["description"].as_str().unwrap_or_default();
    name.starts_with("lb-sg-")
        && description.starts_with("Security Group for ")
        && description.ends_with(&format!(" Service LoadBalancer in cluster {cluster}"))
}

/// `IPv6` for an IPv6 CIDR, else `IPv4`.
pub fn ethertype(cidr: &str) -> &'static str {
    if cidr.contains(':') {
        "IPv6"
    } else {
        "IPv4"
    }
}

fn protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

/// The rules the group must hold: the health check node port (TCP) from the member subnet, and
/// every node port from the member subnet, or, with the `ovn` provider, from the allowed source
/// ranges (any address when none are set). Sorted, without duplicates.
pub fn wanted_rules(
    request: &LoadBalancerRequest,
    member_cidr: &str,
    provider: &str,
) -> Vec<RuleSpec> {
    let mut out = Vec::new();
    if let Some(port) = request.health_check_node_port.filter(|p| *p != 0) {
        out.push(RuleSpec {
            protocol: "tcp".into(),
            ethertype: ethertype(member_cidr),
            remote_ip_prefix: member_cidr.into(),
            port,
        });
    }
    let sources: Vec<String> = if provider == "ovn" {
        if request.source_ranges.is_empty() {
            vec!["0.0.0.0/0".into()]
        } else {
            request.source_ranges.clone()
        }
    } else {
        vec![member_cidr.to_owned()]
    };
    for port in request.ports.iter().filter(|p| p.node_port != 0) {
        for cidr in &sources {
            out.push(RuleSpec {
                protocol: protocol(port.protocol).into(),
                ethertype: ethertype(cidr),
                remote_ip_prefix: cidr.clone(),
                port: port.node_port,
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A rule read from Neutron, when it is of the kind we manage (ingress, one port, a CIDR).
pub fn managed_rule(rule: &Value) -> Option<RuleSpec> {
    if rule["direction"] != "ingress" {
        return None;
    }
    let min = rule["port_range_min"].as_u64()?;
    let max = rule["port_range_max"].as_u64()?;
    if min != max {
        return None;
    }
    Some(RuleSpec {
        protocol: rule["protocol"].as_str()?.to_ascii_lowercase(),
        ethertype: if rule["ethertype"] == "IPv6" {
            "IPv6"
        } else {
            "IPv4"
        },
        remote_ip_prefix: rule["remote_ip_prefix"].as_str()?.to_owned(),
        port: u16::try_from(min).ok()?,
    })
}

/// The rules to create and the ids of the rules to delete. Rules of other kinds (egress, port
/// ranges, remote groups) are left alone.
pub fn rule_diff(wanted: &[RuleSpec], existing: &[Value]) -> (Vec<RuleSpec>, Vec<String>) {
    let have: Vec<(RuleSpec, String)> = existing
        .iter()
        .filter_map(|r| Some((managed_rule(r)?, r["id"].as_str()?.to_owned())))
        .collect();
    let create = wanted
        .iter()
        .filter(|w| !have.iter().any(|(h, _)| h == *w))
        .cloned()
        .collect();
    let delete = have
        .iter()
        .filter(|(h, _)| !wanted.contains(h))
        .map(|(_, id)| id.clone())
        .collect();
    (create, delete)
}

/// A member to open the group to: the node's server and the address Octavia sends traffic to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberPort {
    /// Nova server id (from the providerID).
    pub server: String,
    /// The member address.
    pub address: String,
}

/// Whether `port` is the member's port: port security on, the member address among its fixed
/// IPs (on `subnet`, when one is set).
pub fn is_member_port(port: &Value, address: &str, subnet: Option<&str>) -> bool {
    port["port_security_enabled"] != false
        && port["fixed_ips"].as_array().is_some_and(|ips| {
            ips.iter().any(|ip| {
                ip["ip_address"] == address && subnet.is_none_or(|s| ip["subnet_id"] == s)
            })
        })
}

/// A port's new security groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortChange {
    /// Port id.
    pub port: String,
    /// Its groups after the change.
    pub groups: Vec<String>,
}

fn groups_of(port: &Value) -> Vec<String> {
    port["security_groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The group `sg` added to a member's port that lacks it (None: nothing to do).
pub fn attach(port: &Value, sg: &str) -> Option<PortChange> {
    let mut groups = groups_of(port);
    if groups.iter().any(|g| g == sg) {
        return None;
    }
    groups.push(sg.to_owned());
    Some(PortChange {
        port: port["id"].as_str()?.to_owned(),
        groups,
    })
}

/// The group `sg` removed from every port holding it that is not a member's (`keep`: port ids).
pub fn detach(ports_with_sg: &[Value], sg: &str, keep: &BTreeSet<String>) -> Vec<PortChange> {
    ports_with_sg
        .iter()
        .filter_map(|p| {
            let id = p["id"].as_str()?;
            if keep.contains(id) {
                return None;
            }
            let groups = groups_of(p);
            groups.iter().any(|g| g == sg).then(|| PortChange {
                port: id.to_owned(),
                groups: groups.into_iter().filter(|g| g != sg).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
