//! The slice of an EC2 instance Stratus needs, and the node addresses derived from it.

use aws_sdk_ec2::types as ec2;
use stratus_cloud::{NodeAddress, NodeAddressType};

use crate::config::IpFamily;
use stratus_aws_api::provider_id::InstanceId;

/// Lifecycle state of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    /// EC2 `pending`.
    Pending,
    /// EC2 `running`.
    Running,
    /// EC2 `stopping`.
    Stopping,
    /// EC2 `stopped`.
    Stopped,
    /// EC2 `shutting-down` (terminating).
    ShuttingDown,
    /// EC2 `terminated`.
    Terminated,
    /// A state this code does not know.
    Unknown,
}

impl InstanceState {
    /// Terminated (or terminating) instances are gone for Kubernetes.
    pub fn is_gone(self) -> bool {
        matches!(
            self,
            InstanceState::Terminated | InstanceState::ShuttingDown
        )
    }

    /// Stopped (or stopping) instances are shut down, not gone.
    pub fn is_shutdown(self) -> bool {
        matches!(self, InstanceState::Stopped | InstanceState::Stopping)
    }
}

/// One network interface attached to an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInterface {
    /// The ENI's device index (0 is the primary).
    pub device_index: i32,
    /// Whether the ENI is attached and in use.
    pub in_use: bool,
    /// Its private IPv4 addresses, primary first.
    pub private_ipv4: Vec<String>,
    /// Its IPv6 addresses.
    pub ipv6: Vec<String>,
}

/// An EC2 instance as seen by Stratus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The instance ID.
    pub id: InstanceId,
    /// Its state.
    pub state: InstanceState,
    /// Its availability zone.
    pub zone: String,
    /// Its instance type.
    pub instance_type: String,
    /// Its private DNS name (may be empty).
    pub private_dns_name: String,
    /// Its public DNS name (may be empty).
    pub public_dns_name: String,
    /// Its primary private IPv4 address.
    pub private_ip: String,
    /// Its public IPv4 address (may be empty).
    pub public_ip: String,
    /// Its network interfaces.
    pub interfaces: Vec<NetworkInterface>,
    /// Its VPC.
    pub vpc_id: String,
    /// IDs of the security groups of the instance (all interfaces), as EC2 lists them.
    pub security_groups: Vec<String>,
}

impl Instance {
    /// Converts an SDK instance; `None` when it has no valid ID.
    pub fn from_sdk(i: &ec2::Instance) -> Option<Instance> {
        let id = InstanceId::parse(i.instance_id()?)?;
        let state = match i.state().and_then(|s| s.name()) {
            Some(ec2::InstanceStateName::Pending) => InstanceState::Pending,
            Some(ec2::InstanceStateName::Running) => InstanceState::Running,
            Some(ec2::InstanceStateName::Stopping) => InstanceState::Stopping,
            Some(ec2::InstanceStateName::Stopped) => InstanceState::Stopped,
            Some(ec2::InstanceStateName::ShuttingDown) => InstanceState::ShuttingDown,
            Some(ec2::InstanceStateName::Terminated) => InstanceState::Terminated,
            _ => InstanceState::Unknown,
        };
        let interfaces = i
            .network_interfaces()
            .iter()
            .map(|n| NetworkInterface {
                device_index: n.attachment().and_then(|a| a.device_index()).unwrap_or(0),
                in_use: n.status() == Some(&ec2::NetworkInterfaceStatus::InUse),
                private_ipv4: n
                    .private_ip_addresses()
                    .iter()
                    .filter_map(|p| p.private_ip_address().map(str::to_string))
                    .collect(),
                ipv6: n
                    .ipv6_addresses()
                    .iter()
                    .filter_map(|p| p.ipv6_address().map(str::to_string))
                    .collect(),
            })
            .collect();
        let text = |v: Option<&str>| v.unwrap_or("").to_string();
        Some(Instance {
            id,
            state,
            zone: text(i.placement().and_then(|p| p.availability_zone())),
            instance_type: text(i.instance_type().map(|t| t.as_str())),
            private_dns_name: text(i.private_dns_name()),
            public_dns_name: text(i.public_dns_name()),
            private_ip: text(i.private_ip_address()),
            public_ip: text(i.public_ip_address()),
            interfaces,
            vpc_id: text(i.vpc_id()),
            security_groups: i
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_string))
                .collect(),
        })
    }

    /// Every private IPv4 the instance has, primary first.
    pub fn private_ipv4s(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.private_ip.as_str())
            .chain(
                self.interfaces
                    .iter()
                    .flat_map(|n| n.private_ipv4.iter().map(String::as_str)),
            )
            .filter(|ip| !ip.is_empty())
    }

    /// Node addresses in the order upstream reports them, families in the configured order.
    pub fn node_addresses(&self, families: &[IpFamily]) -> Vec<NodeAddress> {
        let mut interfaces: Vec<&NetworkInterface> =
            self.interfaces.iter().filter(|n| n.in_use).collect();
        interfaces.sort_by_key(|n| n.device_index);
        let mut out: Vec<NodeAddress> = Vec::new();
        let mut push = |kind, addr: &str| {
            let a = NodeAddress::new(kind, addr);
            if !addr.is_empty() && !out.contains(&a) {
                out.push(a);
            }
        };
        for family in families {
            match family {
                IpFamily::Ipv4 => {
                    if interfaces.is_empty() {
                        push(NodeAddressType::InternalIP, &self.private_ip);
                    }
                    for ip in interfaces.iter().flat_map(|n| &n.private_ipv4) {
                        push(NodeAddressType::InternalIP, ip);
                    }
                    push(NodeAddressType::ExternalIP, &self.public_ip);
                }
                IpFamily::Ipv6 => {
                    for ip in interfaces.iter().filter_map(|n| n.ipv6.first()) {
                        push(NodeAddressType::InternalIP, ip);
                    }
                }
            }
        }
        push(NodeAddressType::InternalDNS, &self.private_dns_name);
        push(NodeAddressType::Hostname, &self.private_dns_name);
        push(NodeAddressType::ExternalDNS, &self.public_dns_name);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Instance {
        Instance {
            id: InstanceId::parse("i-0abc").unwrap(),
            state: InstanceState::Running,
            zone: "us-east-1a".into(),
            instance_type: "m5.large".into(),
            private_dns_name: "ip-10-0-0-5.ec2.internal".into(),
            public_dns_name: "ec2-1-2-3-4.compute-1.amazonaws.com".into(),
            private_ip: "10.0.0.5".into(),
            public_ip: "1.2.3.4".into(),
            interfaces: vec![
                NetworkInterface {
                    device_index: 1,
                    in_use: true,
                    private_ipv4: vec!["10.0.1.9".into()],
                    ipv6: vec!["2600::2".into()],
                },
                NetworkInterface {
                    device_index: 0,
                    in_use: true,
                    private_ipv4: vec!["10.0.0.5".into(), "10.0.0.6".into()],
                    ipv6: vec!["2600::1".into(), "2600::9".into()],
                },
                NetworkInterface {
                    device_index: 2,
                    in_use: false,
                    private_ipv4: vec!["10.0.2.2".into()],
                    ipv6: vec![],
                },
            ],
            vpc_id: String::new(),
            security_groups: vec![],
        }
    }

    fn render(addrs: &[NodeAddress]) -> Vec<String> {
        addrs
            .iter()
            .map(|a| format!("{}={}", a.kind.as_str(), a.address))
            .collect()
    }

    #[test]
    fn ipv4_addresses_follow_device_order_and_skip_unused_interfaces() {
        let got = render(&sample().node_addresses(&[IpFamily::Ipv4]));
        assert_eq!(
            got,
            vec![
                "InternalIP=10.0.0.5",
                "InternalIP=10.0.0.6",
                "InternalIP=10.0.1.9",
                "ExternalIP=1.2.3.4",
                "InternalDNS=ip-10-0-0-5.ec2.internal",
                "Hostname=ip-10-0-0-5.ec2.internal",
                "ExternalDNS=ec2-1-2-3-4.compute-1.amazonaws.com",
            ]
        );
    }

    #[test]
    fn dual_stack_puts_the_first_family_first() {
        let got = render(&sample().node_addresses(&[IpFamily::Ipv6, IpFamily::Ipv4]));
        assert_eq!(&got[..2], ["InternalIP=2600::1", "InternalIP=2600::2"]);
        assert_eq!(got[2], "InternalIP=10.0.0.5");
    }

    #[test]
    fn instance_without_interfaces_uses_its_private_ip() {
        let mut i = sample();
        i.interfaces.clear();
        i.public_ip.clear();
        i.public_dns_name.clear();
        let got = render(&i.node_addresses(&[IpFamily::Ipv4]));
        assert_eq!(
            got,
            vec![
                "InternalIP=10.0.0.5",
                "InternalDNS=ip-10-0-0-5.ec2.internal",
                "Hostname=ip-10-0-0-5.ec2.internal"
            ]
        );
    }

    #[test]
    fn states() {
        assert!(InstanceState::Terminated.is_gone());
        assert!(!InstanceState::Stopped.is_gone());
        assert!(InstanceState::Stopped.is_shutdown());
        assert!(!InstanceState::Running.is_shutdown());
    }
}
