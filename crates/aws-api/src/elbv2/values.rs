//! The ELBv2 client's values, shaped as AWS has them: load balancers, listeners and their
//! actions, rules, target groups with health checks, targets; what a create or modify sends.
//! Fields AWS may leave out are `Option`s: each caller applies its own defaults.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{IpAddressType, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum};
use elbv2::types::{RuleCondition, TargetTypeEnum};

/// A load balancer (application or network) as AWS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancer {
    /// ARN.
    pub arn: String,
    /// Name.
    pub name: String,
    /// DNS name (the ingress hostname).
    pub dns_name: String,
    /// `internet-facing` or `internal`, when AWS says.
    pub scheme: Option<String>,
    /// `ipv4` or `dualstack`, when AWS says.
    pub ip_address_type: Option<String>,
    /// Its security groups, sorted.
    pub security_groups: Vec<String>,
    /// Its subnets, sorted.
    pub subnets: Vec<String>,
}

impl LoadBalancer {
    /// The value of a described or created load balancer.
    pub fn of(l: &elbv2::types::LoadBalancer) -> Self {
        let mut security_groups = l.security_groups().to_vec();
        security_groups.sort();
        let mut subnets: Vec<String> = l
            .availability_zones()
            .iter()
            .filter_map(|z| z.subnet_id().map(str::to_string))
            .collect();
        subnets.sort();
        LoadBalancer {
            arn: l.load_balancer_arn().unwrap_or_default().to_string(),
            name: l.load_balancer_name().unwrap_or_default().to_string(),
            dns_name: l.dns_name().unwrap_or_default().to_string(),
            scheme: l.scheme().map(|s| s.as_str().to_string()),
            ip_address_type: l.ip_address_type().map(|t| t.as_str().to_string()),
            security_groups,
            subnets,
        }
    }

    /// Whether AWS says `internet-facing`.
    pub fn is_internet_facing(&self) -> bool {
        self.scheme.as_deref() == Some(LoadBalancerSchemeEnum::InternetFacing.as_str())
    }

    /// Whether AWS says `internal`.
    pub fn is_internal(&self) -> bool {
        self.scheme.as_deref() == Some(LoadBalancerSchemeEnum::Internal.as_str())
    }

    /// Whether AWS says `dualstack`.
    pub fn is_dualstack(&self) -> bool {
        self.ip_address_type.as_deref() == Some(IpAddressType::Dualstack.as_str())
    }
}

/// One subnet of a load balancer with, optionally, its Elastic IP or private address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetMapping {
    /// Subnet ID.
    pub subnet: String,
    /// Elastic IP allocation ID (internet-facing NLB).
    pub allocation_id: Option<String>,
    /// Private IPv4 address (internal NLB).
    pub private_ipv4_address: Option<String>,
}

/// Where a new load balancer goes: plain subnet IDs (`Subnets`) or mappings (`SubnetMappings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `Subnets`.
    Subnets(Vec<String>),
    /// `SubnetMappings`.
    Mappings(Vec<SubnetMapping>),
}

/// A load balancer to create.
#[derive(Debug, Clone)]
pub struct NewLoadBalancer<'a> {
    /// Name.
    pub name: &'a str,
    /// `application` or `network`.
    pub kind: LoadBalancerTypeEnum,
    /// Internet-facing (else internal).
    pub internet_facing: bool,
    /// `IpAddressType`, when sent.
    pub ip_address_type: Option<IpAddressType>,
    /// Its subnets.
    pub placement: Placement,
    /// Security groups (none: not sent).
    pub security_groups: &'a [String],
    /// Tags.
    pub tags: &'a BTreeMap<String, String>,
}

/// An action of a listener as AWS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionView {
    /// `forward`, `redirect`, `fixed-response`…
    pub kind: String,
    /// The target group a forward goes to.
    pub target_group_arn: Option<String>,
    /// The port a redirect goes to.
    pub redirect_port: Option<String>,
}

/// A listener as AWS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listener {
    /// ARN.
    pub arn: Option<String>,
    /// Port.
    pub port: Option<i32>,
    /// Protocol (`HTTP`, `HTTPS`, `TCP`, `UDP`, `TLS`, `TCP_UDP`).
    pub protocol: Option<String>,
    /// Default actions, in order.
    pub default_actions: Vec<ActionView>,
    /// Certificate ARNs it lists (the default one first).
    pub certificates: Vec<String>,
    /// Security policy.
    pub ssl_policy: Option<String>,
    /// ALPN policies.
    pub alpn_policy: Vec<String>,
}

impl Listener {
    /// The value of a described listener.
    pub fn of(l: &elbv2::types::Listener) -> Self {
        Listener {
            arn: l.listener_arn().map(str::to_string),
            port: l.port(),
            protocol: l.protocol().map(|p| p.as_str().to_string()),
            default_actions: l
                .default_actions()
                .iter()
                .map(|a| ActionView {
                    kind: a.r#type().map_or(String::new(), |t| t.as_str().to_string()),
                    target_group_arn: a.target_group_arn().map(str::to_string),
                    redirect_port: a
                        .redirect_config()
                        .and_then(|r| r.port())
                        .map(str::to_string),
                })
                .collect(),
            certificates: l
                .certificates()
                .iter()
                .filter_map(|c| c.certificate_arn().map(str::to_string))
                .collect(),
            ssl_policy: l.ssl_policy().map(str::to_string),
            alpn_policy: l.alpn_policy().to_vec(),
        }
    }
}

/// The default action a listener is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultAction {
    /// Forward to a target group.
    Forward(String),
    /// Redirect (301) to HTTPS on this port.
    RedirectHttps(i32),
    /// A fixed `404` `text/plain` answer.
    NotFound,
}

/// A listener's settings on create or modify; a None field is not sent (on modify: stays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSettings {
    /// Port.
    pub port: Option<i32>,
    /// Protocol.
    pub protocol: Option<ProtocolEnum>,
    /// The default certificate.
    pub certificate: Option<String>,
    /// Security policy.
    pub ssl_policy: Option<String>,
    /// ALPN policy.
    pub alpn_policy: Option<String>,
    /// The default action.
    pub default_action: DefaultAction,
}

/// A non-default rule as AWS describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// ARN.
    pub arn: String,
    /// Priority.
    pub priority: i32,
    /// Host headers.
    pub hosts: Vec<String>,
    /// Path patterns.
    pub paths: Vec<String>,
    /// The target group its first action forwards to.
    pub target_group: String,
}

/// A forwarding rule to create.
#[derive(Debug, Clone, Copy)]
pub struct NewRule<'a> {
    /// Priority.
    pub priority: i32,
    /// Host headers (none: no condition).
    pub hosts: &'a [String],
    /// Path patterns (none: no condition).
    pub paths: &'a [String],
    /// The target group it forwards to.
    pub target_group_arn: &'a str,
}

/// Host and path values of a condition (the `*Config` form, else the legacy `Values`).
pub fn condition_values(c: &RuleCondition) -> (Vec<String>, Vec<String>) {
    let legacy = c.values().to_vec();
    match c.field() {
        Some("host-header") => (
            c.host_header_config()
                .map(|h| h.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
            Vec::new(),
        ),
        Some("path-pattern") => (
            Vec::new(),
            c.path_pattern_config()
                .map(|p| p.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

/// A target group's health check as AWS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthCheck {
    /// Protocol.
    pub protocol: Option<String>,
    /// Port (`traffic-port` or a number).
    pub port: Option<String>,
    /// Path (HTTP checks).
    pub path: Option<String>,
    /// Seconds between checks.
    pub interval: Option<i32>,
    /// Seconds before a check fails.
    pub timeout: Option<i32>,
    /// Successes before healthy.
    pub healthy_threshold: Option<i32>,
    /// Failures before unhealthy.
    pub unhealthy_threshold: Option<i32>,
    /// The HTTP codes of success (HTTP checks).
    pub http_codes: Option<String>,
}

/// A health check to set; a None path or matcher is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckSettings {
    /// Protocol.
    pub protocol: String,
    /// Port (`traffic-port` or a number).
    pub port: String,
    /// Path.
    pub path: Option<String>,
    /// Seconds between checks.
    pub interval: i32,
    /// Seconds before a check fails.
    pub timeout: i32,
    /// Successes before healthy.
    pub healthy_threshold: i32,
    /// Failures before unhealthy.
    pub unhealthy_threshold: i32,
    /// The HTTP codes of success.
    pub http_codes: Option<String>,
}

/// A target group as AWS describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetGroup {
    /// ARN.
    pub arn: String,
    /// Name.
    pub name: String,
    /// `instance`, `ip`, `lambda` or `alb`, when AWS says.
    pub target_type: Option<String>,
    /// Traffic port.
    pub port: Option<i32>,
    /// VPC.
    pub vpc_id: Option<String>,
    /// `ipv4` or `ipv6`, when AWS says.
    pub ip_address_type: Option<String>,
    /// Traffic protocol (`TCP`, `TLS`, `HTTP`…), when AWS says.
    pub protocol: Option<String>,
    /// Its health check.
    pub health_check: HealthCheck,
}

impl TargetGroup {
    /// The value of a described target group.
    pub fn of(g: &elbv2::types::TargetGroup) -> Self {
        TargetGroup {
            arn: g.target_group_arn().unwrap_or_default().to_string(),
            name: g.target_group_name().unwrap_or_default().to_string(),
            target_type: g.target_type().map(|t| t.as_str().to_string()),
            port: g.port(),
            vpc_id: g.vpc_id().map(str::to_string),
            ip_address_type: g.ip_address_type().map(|t| t.as_str().to_string()),
            protocol: g.protocol().map(|p| p.as_str().to_string()),
            health_check: HealthCheck {
                protocol: g.health_check_protocol().map(|p| p.as_str().to_string()),
                port: g.health_check_port().map(str::to_string),
                path: g.health_check_path().map(str::to_string),
                interval: g.health_check_interval_seconds(),
                timeout: g.health_check_timeout_seconds(),
                healthy_threshold: g.healthy_threshold_count(),
                unhealthy_threshold: g.unhealthy_threshold_count(),
                http_codes: g.matcher().and_then(|m| m.http_code()).map(str::to_string),
            },
        }
    }

    /// Its target type, AWS's default (`instance`) when AWS does not say.
    pub fn target_type_or_default(&self) -> &str {
        self.target_type.as_deref().unwrap_or("instance")
    }
}

/// A target group to create.
#[derive(Debug, Clone)]
pub struct NewTargetGroup<'a> {
    /// Name.
    pub name: &'a str,
    /// Traffic protocol.
    pub protocol: ProtocolEnum,
    /// Traffic port (targets may carry their own).
    pub port: i32,
    /// VPC.
    pub vpc_id: &'a str,
    /// `instance` or `ip`.
    pub target_type: TargetTypeEnum,
    /// Health check.
    pub health_check: &'a HealthCheckSettings,
    /// Tags.
    pub tags: &'a BTreeMap<String, String>,
}

/// One registered target: an instance ID or an IP address, with its port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetRef {
    /// Instance ID (`instance` groups) or IP address (`ip` groups).
    pub id: String,
    /// The port traffic goes to.
    pub port: i32,
}

/// A registered target and its health state (`initial`, `healthy`, `unhealthy`, `draining`…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetHealthState {
    /// The target.
    pub target: TargetRef,
    /// AWS's health state, lower case.
    pub state: String,
}
