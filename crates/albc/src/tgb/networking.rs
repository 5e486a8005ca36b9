//! `spec.networking` of a TargetGroupBinding as security-group rules, a pure plan: every peer of
//! an ingress rule (a security group or a CIDR) may reach every port of it — a number, a name
//! (the ports the binding registers targets on, which is what the name resolves to) or none
//! (every port) — on TCP (default) or UDP. The rules carry upstream's description so they are
//! found again; one security group's wanted rules are the union over every binding.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use stratus_aws_api::sg_rules::{CidrRule, GroupRule};

use crate::crd::Networking;

/// The description of every rule this controller manages on a target's security group.
pub const SHARED_DESCRIPTION: &str = "elbv2.k8s.aws/targetGroupBinding=shared";

/// The rules one binding wants on the security group of each of its targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Rules from security groups.
    pub groups: BTreeSet<GroupRule>,
    /// Rules from CIDRs.
    pub cidrs: BTreeSet<CidrRule>,
}

impl Rules {
    /// Adds `other`'s rules.
    pub fn extend(&mut self, other: &Rules) {
        self.groups.extend(other.groups.iter().cloned());
        self.cidrs.extend(other.cidrs.iter().cloned());
    }

    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.cidrs.is_empty()
    }
}

/// The rules of `networking` for a binding whose targets listen on `target_ports`.
pub fn wanted_rules(
    networking: &Networking,
    target_ports: &BTreeSet<i32>,
) -> Result<Rules, String> {
    let mut out = Rules::default();
    for (i, rule) in networking.ingress.iter().enumerate() {
        let mut ranges = Vec::new();
        for p in &rule.ports {
            let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
                "TCP" => "tcp",
                "UDP" => "udp",
                other => {
                    return Err(format!(
                        "spec.networking.ingress[{i}]: protocol {other:?} (TCP or UDP)"
                    ))
                }
            };
            match &p.port {
                None => ranges.push((protocol, 0, 65535)),
                Some(IntOrString::Int(n)) if (1..=65535).contains(n) => {
                    ranges.push((protocol, *n, *n))
                }
                Some(IntOrString::Int(n)) => {
                    return Err(format!(
                        "spec.networking.ingress[{i}]: port {n} out of range"
                    ))
                }
                Some(IntOrString::String(_)) => {
                    ranges.extend(target_ports.iter().map(|t| (protocol, *t, *t)))
                }
            }
        }
        for peer in &rule.from {
            match (&peer.security_group, &peer.ip_block) {
                (Some(sg), None) if !sg.group_id.is_empty() => {
                    for (protocol, from, to) in &ranges {
                        out.groups.insert(GroupRule {
                            protocol: protocol.to_string(),
                            from: *from,
                            to: *to,
                            source_group: sg.group_id.clone(),
                            description: SHARED_DESCRIPTION.into(),
                        });
                    }
                }
                (None, Some(block)) => {
                    stratus_aws_api::sg_rules::check_source_ranges(std::slice::from_ref(
                        &block.cidr,
                    ))
                    .map_err(|e| format!("spec.networking.ingress[{i}]: {e}"))?;
                    for (protocol, from, to) in &ranges {
                        out.cidrs.insert(CidrRule {
                            protocol: protocol.to_string(),
                            from: *from,
                            to: *to,
                            cidr: block.cidr.clone(),
                            description: SHARED_DESCRIPTION.into(),
                        });
                    }
                }
                _ => {
                    return Err(format!(
                        "spec.networking.ingress[{i}]: each peer needs exactly one of securityGroup.groupID or ipBlock.cidr"
                    ))
                }
            }
        }
    }
    Ok(out)
}

/// The union of every binding's wanted rules on each security group.
pub fn union_by_group<'a>(
    bindings: impl IntoIterator<Item = &'a BTreeMap<String, Rules>>,
) -> BTreeMap<String, Rules> {
    let mut out: BTreeMap<String, Rules> = BTreeMap::new();
    for per_group in bindings {
        for (group, rules) in per_group {
            out.entry(group.clone()).or_default().extend(rules);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{
        IpBlock, NetworkingIngressRule, NetworkingPeer, NetworkingPort, SecurityGroupRef,
    };

    fn networking(port: Option<IntOrString>, peers: Vec<NetworkingPeer>) -> Networking {
        Networking {
            ingress: vec![NetworkingIngressRule {
                from: peers,
                ports: vec![NetworkingPort {
                    protocol: None,
                    port,
                }],
            }],
        }
    }

    fn sg(id: &str) -> NetworkingPeer {
        NetworkingPeer {
            security_group: Some(SecurityGroupRef {
                group_id: id.into(),
            }),
            ip_block: None,
        }
    }

    #[test]
    fn ports_by_number_name_or_all() {
        let targets = BTreeSet::from([8080, 8081]);
        let one = wanted_rules(
            &networking(Some(IntOrString::Int(80)), vec![sg("sg-b")]),
            &targets,
        )
        .unwrap();
        let r: Vec<_> = one
            .groups
            .iter()
            .map(|g| (g.from, g.to, g.protocol.as_str()))
            .collect();
        assert_eq!(r, vec![(80, 80, "tcp")]);
        assert!(one
            .groups
            .iter()
            .all(|g| g.description == SHARED_DESCRIPTION));
        let named = wanted_rules(
            &networking(Some(IntOrString::String("http".into())), vec![sg("sg-b")]),
            &targets,
        )
        .unwrap();
        assert_eq!(named.groups.len(), 2);
        let all = wanted_rules(&networking(None, vec![sg("sg-b")]), &targets).unwrap();
        let g = all.groups.first().unwrap();
        assert_eq!((g.from, g.to), (0, 65535));
        let cidr = wanted_rules(
            &networking(
                Some(IntOrString::Int(443)),
                vec![NetworkingPeer {
                    ip_block: Some(IpBlock {
                        cidr: "10.0.0.0/16".into(),
                    }),
                    security_group: None,
                }],
            ),
            &targets,
        )
        .unwrap();
        assert_eq!(cidr.cidrs.len(), 1);
    }

    #[test]
    fn bad_peers_and_ports_are_errors() {
        let t = BTreeSet::new();
        assert!(wanted_rules(&networking(Some(IntOrString::Int(0)), vec![sg("sg")]), &t).is_err());
        let both = NetworkingPeer {
            ip_block: Some(IpBlock {
                cidr: "10.0.0.0/8".into(),
            }),
            security_group: Some(SecurityGroupRef {
                group_id: "sg".into(),
            }),
        };
        assert!(wanted_rules(&networking(None, vec![both]), &t)
            .unwrap_err()
            .contains("exactly one"));
        let bad_cidr = NetworkingPeer {
            ip_block: Some(IpBlock {
                cidr: "nope".into(),
            }),
            security_group: None,
        };
        assert!(wanted_rules(&networking(None, vec![bad_cidr]), &t).is_err());
    }

    #[test]
    fn union_over_bindings() {
        let t = BTreeSet::from([8080]);
        let a = wanted_rules(
            &networking(Some(IntOrString::Int(80)), vec![sg("sg-b")]),
            &t,
        )
        .unwrap();
        let b = wanted_rules(
            &networking(Some(IntOrString::Int(81)), vec![sg("sg-b")]),
            &t,
        )
        .unwrap();
        let one = BTreeMap::from([("sg-node".to_string(), a)]);
        let two = BTreeMap::from([("sg-node".to_string(), b)]);
        let u = union_by_group([&one, &two]);
        assert_eq!(u["sg-node"].groups.len(), 2);
    }
}
