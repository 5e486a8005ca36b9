//! The ELBv2 calls only network load balancers need (the NLB with subnet mappings, L4
//! listeners forwarding to one target group, TLS ones with their certificate, policy and ALPN
//! policy); everything else is shared with the Ingress path in [`crate::ingress::alb_api`].

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    Action, ActionTypeEnum, Certificate, IpAddressType, LoadBalancerSchemeEnum,
    LoadBalancerTypeEnum, ProtocolEnum, SubnetMapping,
};
use stratus_cloud::CloudError;

use crate::ingress::alb_api::{missing, tags, AlbApi, AlbState};
use crate::service::model::{L4Protocol, SubnetSlot};

/// A listener as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveListener {
    /// ARN.
    pub arn: String,
    /// Protocol (`TCP`, `UDP`, ...).
    pub protocol: String,
    /// The target group its default action forwards to.
    pub target_group: Option<String>,
    /// The default certificate (TLS).
    pub certificate: Option<String>,
    /// The security policy (TLS).
    pub ssl_policy: Option<String>,
    /// The ALPN policy (TLS), if any.
    pub alpn: Option<String>,
}

/// A listener as planned: what [`AlbApi::create_forward_listener`] makes and
/// [`AlbApi::modify_forward_listener`] sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedListener {
    /// Port.
    pub port: i32,
    /// Protocol.
    pub protocol: L4Protocol,
    /// The target group it forwards to.
    pub target_group: String,
    /// TLS: the certificates (the first is the default one).
    pub certificates: Vec<String>,
    /// TLS: the security policy.
    pub ssl_policy: Option<String>,
    /// TLS: the ALPN policy.
    pub alpn: Option<String>,
}

fn protocol(p: L4Protocol) -> ProtocolEnum {
    match p {
        L4Protocol::Tcp => ProtocolEnum::Tcp,
        L4Protocol::Udp => ProtocolEnum::Udp,
        L4Protocol::Tls => ProtocolEnum::Tls,
        L4Protocol::TcpUdp => ProtocolEnum::TcpUdp,
    }
}

fn default_certificate(l: &WantedListener) -> Option<Vec<Certificate>> {
    l.certificates
        .first()
        .map(|c| vec![Certificate::builder().certificate_arn(c).build()])
}

impl AlbApi {
    /// Creates a network load balancer on `slots` (a subnet each, with its static private
    /// address when one is asked for) with `security_groups` (none: an NLB without groups).
    pub async fn create_network(
        &self,
        name: &str,
        internet_facing: bool,
        slots: &[SubnetSlot],
        security_groups: &[String],
        wanted: &BTreeMap<String, String>,
    ) -> Result<AlbState, CloudError> {
        let scheme = if internet_facing {
            LoadBalancerSchemeEnum::InternetFacing
        } else {
            LoadBalancerSchemeEnum::Internal
        };
        let mappings = subnet_mappings(slots);
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .name(name)
                    .r#type(LoadBalancerTypeEnum::Network)
                    .scheme(scheme.clone())
                    .ip_address_type(IpAddressType::Ipv4)
                    .set_subnet_mappings(Some(mappings.clone()))
                    .set_security_groups(Some(security_groups.to_vec()).filter(|g| !g.is_empty()))
                    .set_tags(Some(tags(wanted)))
                    .send()
            })
            .await?;
        let l = out
            .load_balancers()
            .first()
            .ok_or_else(|| missing("CreateLoadBalancer"))?;
        Ok(AlbState::of(l))
    }

    /// Puts a network load balancer on `slots` (AWS adds subnets in place; what it refuses
    /// comes back as the error).
    pub async fn set_subnets(&self, arn: &str, slots: &[SubnetSlot]) -> Result<(), CloudError> {
        let mappings = subnet_mappings(slots);
        self.api
            .call("SetSubnets", || {
                self.client
                    .set_subnets()
                    .load_balancer_arn(arn)
                    .set_subnet_mappings(Some(mappings.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// The listeners of a load balancer by port, with where they forward.
    pub async fn forwarding_listeners(
        &self,
        lb_arn: &str,
    ) -> Result<BTreeMap<i32, LiveListener>, CloudError> {
        let out = self
            .api
            .call("DescribeListeners", || {
                self.client
                    .describe_listeners()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await?;
        Ok(out
            .listeners()
            .iter()
            .filter_map(|l| {
                Some((
                    l.port()?,
                    LiveListener {
                        arn: l.listener_arn()?.to_string(),
                        protocol: l.protocol().map(|p| p.as_str().to_string())?,
                        target_group: l
                            .default_actions()
                            .first()
                            .and_then(|a| a.target_group_arn())
                            .map(str::to_string),
                        certificate: l
                            .certificates()
                            .first()
                            .and_then(|c| c.certificate_arn())
                            .map(str::to_string),
                        ssl_policy: l.ssl_policy().map(str::to_string),
                        alpn: l.alpn_policy().first().cloned(),
                    },
                ))
            })
            .collect())
    }

    /// Creates an L4 listener forwarding everything to its target group; a TLS one with its
    /// default certificate, policy and ALPN policy (the other certificates are added after).
    pub async fn create_forward_listener(
        &self,
        lb_arn: &str,
        l: &WantedListener,
    ) -> Result<String, CloudError> {
        let action = forward(&l.target_group);
        let out = self
            .api
            .call("CreateListener", || {
                self.client
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .port(l.port)
                    .protocol(protocol(l.protocol))
                    .default_actions(action.clone())
                    .set_certificates(default_certificate(l))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .set_alpn_policy(l.alpn.clone().map(|a| vec![a]))
                    .send()
            })
            .await?;
        out.listeners()
            .first()
            .and_then(|l| l.listener_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateListener"))
    }

    /// Sets a listener's target group and, on a TLS one, its default certificate, policy and
    /// ALPN policy; the protocol stays.
    pub async fn modify_forward_listener(
        &self,
        arn: &str,
        l: &WantedListener,
    ) -> Result<(), CloudError> {
        let action = forward(&l.target_group);
        self.api
            .call("ModifyListener", || {
                self.client
                    .modify_listener()
                    .listener_arn(arn)
                    .default_actions(action.clone())
                    .set_certificates(default_certificate(l))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .set_alpn_policy(l.alpn.clone().map(|a| vec![a]))
                    .send()
            })
            .await?;
        Ok(())
    }
}

fn subnet_mappings(slots: &[SubnetSlot]) -> Vec<SubnetMapping> {
    slots
        .iter()
        .map(|s| {
            SubnetMapping::builder()
                .subnet_id(&s.subnet)
                .set_private_ipv4_address(s.private_ip.map(|ip| ip.to_string()))
                .set_allocation_id(s.allocation.clone())
                .build()
        })
        .collect()
}

fn forward(tg_arn: &str) -> Action {
    Action::builder()
        .r#type(ActionTypeEnum::Forward)
        .target_group_arn(tg_arn)
        .build()
}

/// The ELBv2 protocol of an L4 listener or target group.
pub fn protocol_enum(p: L4Protocol) -> ProtocolEnum {
    protocol(p)
}
