//! Node addresses from a server and its ports, as openstack-cloud-controller-manager classifies
//! them: the fixed IPs of the server's active ports first (InternalIP), then the access IPs
//! (ExternalIP), the `hostname` metadata (Hostname), then the server's addresses by network name
//! in name order (floating IPs and public networks ExternalIP; other networks InternalIP, or left
//! out when `internal-network-name` names others), IPv6 left out when disabled, and finally the
//! `address-sort-order` CIDRs first. Pure.

use std::net::IpAddr;

use stratus_cloud::{Cidr, NodeAddress, NodeAddressType};

use crate::compute::Server;
use crate::network::Port;
use stratus_openstack_api::config::NetworkingConfig;

fn is_ipv6(addr: &str) -> bool {
    matches!(addr.parse::<IpAddr>(), Ok(IpAddr::V6(_)))
}

fn add(out: &mut Vec<NodeAddress>, kind: NodeAddressType, address: &str) {
    if !out.iter().any(|a| a.kind == kind && a.address == address) {
        out.push(NodeAddress::new(kind, address));
    }
}

fn remove(out: &mut Vec<NodeAddress>, address: &str) {
    out.retain(|a| a.address != address);
}

/// The sort priority of an address: higher for earlier CIDRs, 0 when none matches.
fn priority(order: &[Cidr], address: &str) -> usize {
    let Ok(ip) = address.parse::<IpAddr>() else {
        return 0;
    };
    order
        .iter()
        .position(|c| c.contains_ip(ip))
        .map_or(0, |i| order.len() - i)
}

/// The node addresses of `server`, whose attached ports are `ports`.
pub fn node_addresses(
    server: &Server,
    ports: &[&Port],
    networking: &NetworkingConfig,
) -> Vec<NodeAddress> {
    let v6_ok = |a: &str| !is_ipv6(a) || !networking.ipv6_support_disabled;
    let mut out = Vec::new();
    for port in ports.iter().filter(|p| p.status == "ACTIVE") {
        for ip in &port.fixed_ips {
            if v6_ok(&ip.ip_address) {
                add(&mut out, NodeAddressType::InternalIP, &ip.ip_address);
            }
        }
    }
    if !server.access_ipv4.is_empty() {
        add(&mut out, NodeAddressType::ExternalIP, &server.access_ipv4);
    }
    if !server.access_ipv6.is_empty() && !networking.ipv6_support_disabled {
        add(&mut out, NodeAddressType::ExternalIP, &server.access_ipv6);
    }
    if let Some(h) = server.metadata.get("hostname").filter(|h| !h.is_empty()) {
        add(&mut out, NodeAddressType::Hostname, h);
    }
    // `addresses` is a map sorted by network name, as upstream sorts it.
    for (network, addrs) in &server.addresses {
        for a in addrs {
            let kind = if a.ip_type == "floating" {
                NodeAddressType::ExternalIP
            } else if networking.public_network_names.contains(network) {
                // A private network listed as public: its address is external only.
                remove(&mut out, &a.addr);
                NodeAddressType::ExternalIP
            } else if networking.internal_network_names.is_empty()
                || networking.internal_network_names.contains(network)
            {
                NodeAddressType::InternalIP
            } else {
                remove(&mut out, &a.addr);
                continue;
            };
            if v6_ok(&a.addr) {
                add(&mut out, kind, &a.addr);
            }
        }
    }
    if !networking.address_sort_order.is_empty() {
        let order = &networking.address_sort_order;
        // Stable: addresses outside every CIDR keep their order after the matching ones.
        out.sort_by(|l, r| {
            let (pl, pr) = (priority(order, &l.address), priority(order, &r.address));
            if pl > 0 && pl == pr {
                let (a, b): (Option<IpAddr>, Option<IpAddr>) =
                    (l.address.parse().ok(), r.address.parse().ok());
                a.cmp(&b)
            } else {
                pr.cmp(&pl)
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{ServerAddress, ServerFlavor};
    use crate::network::FixedIp;
    use std::collections::BTreeMap;

    fn server(addresses: &[(&str, &str, &str)]) -> Server {
        let mut map: BTreeMap<String, Vec<ServerAddress>> = BTreeMap::new();
        for (net, addr, kind) in addresses {
            map.entry(net.to_string()).or_default().push(ServerAddress {
                addr: addr.to_string(),
                ip_type: kind.to_string(),
            });
        }
        Server {
            id: "s".into(),
            name: "n".into(),
            status: "ACTIVE".into(),
            flavor: ServerFlavor::default(),
            availability_zone: "nova".into(),
            addresses: map,
            access_ipv4: String::new(),
            access_ipv6: String::new(),
            metadata: BTreeMap::new(),
            host_id: String::new(),
        }
    }

    fn port(ips: &[&str], status: &str) -> Port {
        Port {
            id: "p".into(),
            device_id: "s".into(),
            device_owner: "compute:nova".into(),
            status: status.into(),
            fixed_ips: ips
                .iter()
                .map(|i| FixedIp {
                    ip_address: i.to_string(),
                })
                .collect(),
        }
    }

    fn shown(v: &[NodeAddress]) -> Vec<String> {
        v.iter()
            .map(|a| format!("{}={}", a.kind.as_str(), a.address))
            .collect()
    }

    #[test]
    fn fixed_floating_and_hostname_in_upstream_order() {
        let mut s = server(&[
            ("private", "10.0.0.5", "fixed"),
            ("private", "172.24.4.9", "floating"),
            ("aaa", "192.168.1.4", "fixed"),
        ]);
        s.metadata.insert("hostname".into(), "w1".into());
        let p = port(&["10.0.0.5"], "ACTIVE");
        let got = node_addresses(&s, &[&p], &NetworkingConfig::default());
        assert_eq!(
            shown(&got),
            vec![
                "InternalIP=10.0.0.5",
                "Hostname=w1",
                "InternalIP=192.168.1.4",
                "ExternalIP=172.24.4.9",
            ]
        );
    }

    #[test]
    fn network_names_decide_and_ipv6_can_be_off() {
        let s = server(&[
            ("ext", "203.0.113.7", "fixed"),
            ("k8s", "10.0.0.5", "fixed"),
            ("k8s", "fd00::5", "fixed"),
            ("other", "10.9.0.1", "fixed"),
        ]);
        let p = port(&["10.9.0.1", "203.0.113.7"], "ACTIVE");
        let down = port(&["10.99.0.1"], "DOWN");
        let net = NetworkingConfig {
            public_network_names: vec!["ext".into()],
            internal_network_names: vec!["k8s".into()],
            ipv6_support_disabled: true,
            address_sort_order: Vec::new(),
        };
        assert_eq!(
            shown(&node_addresses(&s, &[&p, &down], &net)),
            vec!["ExternalIP=203.0.113.7", "InternalIP=10.0.0.5"],
            "public network external only, unnamed internal network left out, inactive port and IPv6 ignored"
        );
    }

    #[test]
    fn sort_order_puts_matching_cidrs_first() {
        let s = server(&[
            ("a", "10.0.0.9", "fixed"),
            ("b", "192.168.0.2", "fixed"),
            ("c", "192.168.0.1", "fixed"),
            ("d", "172.16.0.1", "fixed"),
        ]);
        let net = NetworkingConfig {
            address_sort_order: vec![
                "192.168.0.0/16".parse().unwrap(),
                "10.0.0.0/8".parse().unwrap(),
            ],
            ..NetworkingConfig::default()
        };
        assert_eq!(
            shown(&node_addresses(&s, &[], &net)),
            vec![
                "InternalIP=192.168.0.1",
                "InternalIP=192.168.0.2",
                "InternalIP=10.0.0.9",
                "InternalIP=172.16.0.1",
            ]
        );
    }
}
