//! Parsing and validation of the `service.beta.kubernetes.io/aws-load-balancer-*` annotations.
//!
//! Pure: no I/O and no AWS calls. [`parse`] turns a Service's annotations into a typed
//! [`LbAnnotations`] or reports every problem it found at once in [`AnnotationErrors`].
//! Keys outside [`PREFIX`] are ignored; unknown keys under it and keys of the other load-balancer
//! kind are ignored too, as upstream does, but listed in [`LbAnnotations::ignored`].

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use stratus_cloud_kit::annotations::{excerpt, AnnotationReader, KeyTable};
pub use stratus_cloud_kit::annotations::{AnnotationErrors, AnnotationProblem, ProblemKind};

/// Common prefix of every annotation handled here.
pub const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";

/// Values longer than this (in characters) are rejected without further parsing, except
/// [`key::ADDITIONAL_RESOURCE_TAGS`] (see [`max_value_chars`]).
///
/// Kubernetes bounds only the total size of an object's annotations (256 KiB). No valid value
/// of a load-balancer annotation comes near 4096 characters (an ARN is at most 2048, a health
/// check path 1024, an ID list of every subnet of a VPC a few hundred), so anything longer is
/// hostile or broken and is refused before it is split, parsed or echoed.
pub const MAX_VALUE_CHARS: usize = 4096;

/// The longest valid `additional-resource-tags` value: [`MAX_TAGS`] tags of the longest key and
/// value AWS allows, each with `=`, `,` and a space.
pub const MAX_TAGS_VALUE_CHARS: usize = MAX_TAGS * (MAX_TAG_KEY_CHARS + MAX_TAG_VALUE_CHARS + 3);

/// The length bound of an annotation's value, in characters.
pub fn max_value_chars(suffix: &str) -> usize {
    if suffix == key::ADDITIONAL_RESOURCE_TAGS {
        MAX_TAGS_VALUE_CHARS
    } else {
        MAX_VALUE_CHARS
    }
}

/// Connection-draining timeout used when draining is enabled without an explicit timeout.
pub const DEFAULT_CONNECTION_DRAINING_TIMEOUT: u32 = 300;

/// Most user tags on one AWS resource (the AWS limit).
pub const MAX_TAGS: usize = 50;
/// Longest tag key AWS accepts.
pub const MAX_TAG_KEY_CHARS: usize = 128;
/// Longest tag value AWS accepts.
pub const MAX_TAG_VALUE_CHARS: usize = 256;
const MAX_HEALTHCHECK_PATH_CHARS: usize = 1024;

/// Annotation suffixes (the part after [`PREFIX`]).
pub mod key {
    /// `nlb`, `nlb-ip` or `external`; absent for a Classic ELB.
    pub const TYPE: &str = "type";
    /// Internal scheme.
    pub const INTERNAL: &str = "internal";
    /// Certificate ARN for TLS listeners.
    pub const SSL_CERT: &str = "ssl-cert";
    /// Which ports get the certificate.
    pub const SSL_PORTS: &str = "ssl-ports";
    /// The SSL negotiation policy of TLS listeners.
    pub const SSL_NEGOTIATION_POLICY: &str = "ssl-negotiation-policy";
    /// Protocol between the load balancer and the nodes.
    pub const BACKEND_PROTOCOL: &str = "backend-protocol";
    /// Proxy protocol (`*` for every port).
    pub const PROXY_PROTOCOL: &str = "proxy-protocol";
    /// Classic ELB access logs on or off.
    pub const ACCESS_LOG_ENABLED: &str = "access-log-enabled";
    /// Access-log interval in minutes (5 or 60).
    pub const ACCESS_LOG_EMIT_INTERVAL: &str = "access-log-emit-interval";
    /// Access-log bucket.
    pub const ACCESS_LOG_S3_BUCKET_NAME: &str = "access-log-s3-bucket-name";
    /// Access-log key prefix.
    pub const ACCESS_LOG_S3_BUCKET_PREFIX: &str = "access-log-s3-bucket-prefix";
    /// Connection draining on or off.
    pub const CONNECTION_DRAINING_ENABLED: &str = "connection-draining-enabled";
    /// Connection-draining timeout in seconds.
    pub const CONNECTION_DRAINING_TIMEOUT: &str = "connection-draining-timeout";
    /// Idle timeout in seconds.
    pub const CONNECTION_IDLE_TIMEOUT: &str = "connection-idle-timeout";
    /// Cross-zone load balancing on or off.
    pub const CROSS_ZONE: &str = "cross-zone-load-balancing-enabled";
    /// Security groups added to the managed one.
    pub const EXTRA_SECURITY_GROUPS: &str = "extra-security-groups";
    /// Security groups replacing the managed one.
    pub const SECURITY_GROUPS: &str = "security-groups";
    /// Health-check protocol.
    pub const HC_PROTOCOL: &str = "healthcheck-protocol";
    /// Health-check port (`traffic-port` or a number).
    pub const HC_PORT: &str = "healthcheck-port";
    /// Health-check path (HTTP/HTTPS).
    pub const HC_PATH: &str = "healthcheck-path";
    /// Successes before a target is healthy.
    pub const HC_HEALTHY_THRESHOLD: &str = "healthcheck-healthy-threshold";
    /// Failures before a target is unhealthy.
    pub const HC_UNHEALTHY_THRESHOLD: &str = "healthcheck-unhealthy-threshold";
    /// Health-check timeout in seconds.
    pub const HC_TIMEOUT: &str = "healthcheck-timeout";
    /// Health-check interval in seconds.
    pub const HC_INTERVAL: &str = "healthcheck-interval";
    /// NLB target-group attributes (`key=value,…`).
    pub const TARGET_GROUP_ATTRIBUTES: &str = "target-group-attributes";
    /// NLB Elastic IP allocations, one per subnet.
    pub const EIP_ALLOCATIONS: &str = "eip-allocations";
    /// NLB private IPv4 addresses, one per subnet.
    pub const PRIVATE_IPV4_ADDRESSES: &str = "private-ipv4-addresses";
    /// Tags added to everything made for the Service.
    pub const ADDITIONAL_RESOURCE_TAGS: &str = "additional-resource-tags";
    /// Subnets (IDs or Name tags) instead of discovery.
    pub const SUBNETS: &str = "subnets";
    /// Only nodes with these labels are targets.
    pub const TARGET_NODE_LABELS: &str = "target-node-labels";
}

/// Every suffix understood by [`parse`].
pub const KNOWN_SUFFIXES: &[&str] = &[
    key::TYPE,
    key::INTERNAL,
    key::SSL_CERT,
    key::SSL_PORTS,
    key::SSL_NEGOTIATION_POLICY,
    key::BACKEND_PROTOCOL,
    key::PROXY_PROTOCOL,
    key::ACCESS_LOG_ENABLED,
    key::ACCESS_LOG_EMIT_INTERVAL,
    key::ACCESS_LOG_S3_BUCKET_NAME,
    key::ACCESS_LOG_S3_BUCKET_PREFIX,
    key::CONNECTION_DRAINING_ENABLED,
    key::CONNECTION_DRAINING_TIMEOUT,
    key::CONNECTION_IDLE_TIMEOUT,
    key::CROSS_ZONE,
    key::EXTRA_SECURITY_GROUPS,
    key::SECURITY_GROUPS,
    key::HC_PROTOCOL,
    key::HC_PORT,
    key::HC_PATH,
    key::HC_HEALTHY_THRESHOLD,
    key::HC_UNHEALTHY_THRESHOLD,
    key::HC_TIMEOUT,
    key::HC_INTERVAL,
    key::TARGET_GROUP_ATTRIBUTES,
    key::EIP_ALLOCATIONS,
    key::PRIVATE_IPV4_ADDRESSES,
    key::ADDITIONAL_RESOURCE_TAGS,
    key::SUBNETS,
    key::TARGET_NODE_LABELS,
];

/// Suffixes that only make sense for a Classic ELB.
pub const CLASSIC_ONLY_SUFFIXES: &[&str] = &[
    key::ACCESS_LOG_ENABLED,
    key::ACCESS_LOG_EMIT_INTERVAL,
    key::ACCESS_LOG_S3_BUCKET_NAME,
    key::ACCESS_LOG_S3_BUCKET_PREFIX,
    key::CONNECTION_DRAINING_ENABLED,
    key::CONNECTION_DRAINING_TIMEOUT,
    key::CONNECTION_IDLE_TIMEOUT,
    key::CROSS_ZONE,
    key::EXTRA_SECURITY_GROUPS,
];

/// Suffixes that only make sense for a Network Load Balancer.
pub const NETWORK_ONLY_SUFFIXES: &[&str] = &[
    key::TARGET_GROUP_ATTRIBUTES,
    key::EIP_ALLOCATIONS,
    key::PRIVATE_IPV4_ADDRESSES,
];

/// Target-group attributes accepted in `target-group-attributes`.
pub const TARGET_GROUP_ATTRIBUTE_KEYS: &[&str] =
    &["preserve_client_ip.enabled", "proxy_protocol_v2.enabled"];

/// Which load balancer the Service asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbKind {
    /// No `type` annotation: a Classic ELB.
    Classic,
    /// `type: nlb`.
    Network,
    /// `type: nlb-ip` or `external`: owned by another controller, not by us.
    Elsewhere,
    /// `type: none` (Deckhouse's patch to upstream): no load balancer, one instance target
    /// group per Service port, for a load balancer made elsewhere to forward to.
    TargetGroupsOnly,
}

/// Protocol spoken between the load balancer and the backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendProtocol {
    /// HTTP.
    Http,
    /// HTTPS.
    Https,
    /// SSL (TLS without HTTP).
    Ssl,
    /// TCP.
    Tcp,
}

/// Health-check protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthCheckProtocol {
    /// TCP.
    Tcp,
    /// HTTP.
    Http,
    /// HTTPS.
    Https,
}

/// Health-check port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthCheckPort {
    /// `traffic-port`: the port traffic is sent to.
    TrafficPort,
    /// A fixed port.
    Port(u16),
}

/// One entry of `ssl-ports`: a Service port number or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    /// By number.
    Number(u16),
    /// By name.
    Name(String),
}

/// Which Service ports get the certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SslPorts {
    /// `*` (also the default).
    All,
    /// Only these ports.
    Only(Vec<PortRef>),
}

impl SslPorts {
    /// Whether a Service port (number and optional name) is listed.
    pub fn matches(&self, port: u16, name: Option<&str>) -> bool {
        match self {
            SslPorts::All => true,
            SslPorts::Only(refs) => refs.iter().any(|r| match r {
                PortRef::Number(n) => *n == port,
                PortRef::Name(n) => Some(n.as_str()) == name,
            }),
        }
    }
}

/// TLS termination settings; present only when `ssl-cert` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslConfig {
    /// The certificate's ARN.
    pub certificate_arn: String,
    /// The ports it applies to.
    pub ports: SslPorts,
    /// The SSL negotiation policy, when set.
    pub negotiation_policy: Option<String>,
}

/// Classic ELB access-log settings; present when any `access-log-*` annotation is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    /// Whether logs are written.
    pub enabled: bool,
    /// Minutes between log files.
    pub emit_interval_minutes: Option<u32>,
    /// The bucket.
    pub s3_bucket_name: Option<String>,
    /// The key prefix.
    pub s3_bucket_prefix: Option<String>,
}

/// Health-check settings overridden by annotations; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthCheckOverrides {
    /// Protocol.
    pub protocol: Option<HealthCheckProtocol>,
    /// Port.
    pub port: Option<HealthCheckPort>,
    /// Path.
    pub path: Option<String>,
    /// Healthy threshold.
    pub healthy_threshold: Option<u32>,
    /// Unhealthy threshold.
    pub unhealthy_threshold: Option<u32>,
    /// Timeout in seconds.
    pub timeout_seconds: Option<u32>,
    /// Interval in seconds.
    pub interval_seconds: Option<u32>,
}

/// The validated load-balancer annotations of one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbAnnotations {
    /// Which load balancer.
    pub kind: LbKind,
    /// Internal scheme.
    pub internal: bool,
    /// TLS termination.
    pub ssl: Option<SslConfig>,
    /// Protocol to the nodes.
    pub backend_protocol: Option<BackendProtocol>,
    /// Proxy protocol on every port.
    pub proxy_protocol: bool,
    /// Access logs.
    pub access_log: Option<AccessLog>,
    /// Connection-draining timeout in seconds when draining is enabled.
    pub connection_draining: Option<u32>,
    /// Idle timeout in seconds.
    pub idle_timeout: Option<u32>,
    /// Cross-zone load balancing.
    pub cross_zone: Option<bool>,
    /// Groups replacing the managed one.
    pub security_groups: Vec<String>,
    /// Groups added to the managed one.
    pub extra_security_groups: Vec<String>,
    /// Health-check overrides.
    pub health_check: HealthCheckOverrides,
    /// NLB target-group attributes.
    pub target_group_attributes: Vec<(String, bool)>,
    /// NLB Elastic IP allocations.
    pub eip_allocations: Vec<String>,
    /// NLB private IPv4 addresses.
    pub private_ipv4_addresses: Vec<Ipv4Addr>,
    /// Additional tags.
    pub additional_tags: BTreeMap<String, String>,
    /// Subnets instead of discovery.
    pub subnets: Vec<String>,
    /// Labels a target node must carry.
    pub target_node_labels: BTreeMap<String, String>,
    /// Annotations that were ignored, as upstream ignores them (unknown keys under the prefix,
    /// keys of the other load-balancer kind): reported as warnings, never fatal.
    pub ignored: Vec<AnnotationProblem>,
}

impl LbAnnotations {
    fn empty(kind: LbKind, internal: bool) -> Self {
        LbAnnotations {
            kind,
            internal,
            ssl: None,
            backend_protocol: None,
            proxy_protocol: false,
            access_log: None,
            connection_draining: None,
            idle_timeout: None,
            cross_zone: None,
            security_groups: Vec::new(),
            extra_security_groups: Vec::new(),
            health_check: HealthCheckOverrides::default(),
            target_group_attributes: Vec::new(),
            eip_allocations: Vec::new(),
            private_ipv4_addresses: Vec::new(),
            additional_tags: BTreeMap::new(),
            subnets: Vec::new(),
            target_node_labels: BTreeMap::new(),
            ignored: Vec::new(),
        }
    }
}

/// `prefix` followed by at least one ASCII alphanumeric and nothing else.
fn is_aws_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A Service port name (DNS label).
fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The AWS annotations of one Service, read through the shared engine.
struct Parser<'a>(AnnotationReader<'a>);

impl<'a> std::ops::Deref for Parser<'a> {
    type Target = AnnotationReader<'a>;
    fn deref(&self) -> &AnnotationReader<'a> {
        &self.0
    }
}

impl std::ops::DerefMut for Parser<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The AWS key table.
const TABLE: KeyTable = KeyTable {
    prefix: PREFIX,
    known: KNOWN_SUFFIXES,
    max_chars: max_value_chars,
    ignorable: is_ignorable,
};

impl<'a> Parser<'a> {
    fn ids(&mut self, suffix: &'static str, prefix: &str) -> Vec<String> {
        let Some((value, items)) = self.list(suffix) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            if is_aws_id(item, prefix) {
                out.push(item.to_owned());
            } else {
                self.invalid(
                    suffix,
                    value,
                    format!("\"{}\" is not a {prefix}… ID", excerpt(item).escape_debug()),
                );
            }
        }
        out
    }

    /// `k=v` items; an item without `=` is a key with an empty value (as upstream).
    fn key_values(&mut self, suffix: &'static str) -> Option<(&'a str, Vec<(&'a str, &'a str)>)> {
        let (value, items) = self.list(suffix)?;
        let mut out = Vec::new();
        for item in items {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            let k = k.trim();
            if k.is_empty() {
                self.invalid(
                    suffix,
                    value,
                    format!("\"{}\" has an empty key", excerpt(item).escape_debug()),
                );
            } else {
                out.push((k, v.trim()));
            }
        }
        Some((value, out))
    }

    fn ssl_ports(&mut self) -> SslPorts {
        let Some((value, items)) = self.list(key::SSL_PORTS) else {
            return SslPorts::All;
        };
        if value.trim() == "*" {
            return SslPorts::All;
        }
        if items.is_empty() {
            self.invalid(key::SSL_PORTS, value, "lists no port");
        }
        let mut refs = Vec::new();
        for item in items {
            if item.bytes().all(|b| b.is_ascii_digit()) {
                match item.parse::<u16>() {
                    Ok(n) if n > 0 => refs.push(PortRef::Number(n)),
                    _ => self.invalid(
                        key::SSL_PORTS,
                        value,
                        format!("port \"{}\" is not in 1..=65535", excerpt(item)),
                    ),
                }
            } else if is_port_name(item) {
                refs.push(PortRef::Name(item.to_owned()));
            } else {
                self.invalid(
                    key::SSL_PORTS,
                    value,
                    format!(
                        "\"{}\" is neither a port number nor a port name (use \"*\" alone for all ports)",
                        excerpt(item).escape_debug()
                    ),
                );
            }
        }
        SslPorts::Only(refs)
    }

    fn ssl(&mut self) -> Option<SslConfig> {
        let ports = self.ssl_ports();
        let negotiation_policy = self.string(key::SSL_NEGOTIATION_POLICY);
        let cert = self.raw(key::SSL_CERT)?;
        if !cert.starts_with("arn:") || cert.chars().any(char::is_whitespace) {
            self.invalid(key::SSL_CERT, cert, "must be a certificate ARN (arn:…)");
            return None;
        }
        Some(SslConfig {
            certificate_arn: cert.to_owned(),
            ports,
            negotiation_policy,
        })
    }

    /// `tls` (a target group's protocol name) is accepted, as SSL, when `tls_allowed`.
    fn backend_protocol(&mut self, tls_allowed: bool) -> Option<BackendProtocol> {
        let value = self.raw(key::BACKEND_PROTOCOL)?;
        let parsed = match value {
            "http" => Some(BackendProtocol::Http),
            "https" => Some(BackendProtocol::Https),
            "ssl" => Some(BackendProtocol::Ssl),
            "tls" if tls_allowed => Some(BackendProtocol::Ssl),
            "tcp" => Some(BackendProtocol::Tcp),
            _ => None,
        };
        if parsed.is_none() {
            self.invalid(
                key::BACKEND_PROTOCOL,
                value,
                "must be one of http, https, ssl, tcp",
            );
        }
        parsed
    }

    fn proxy_protocol(&mut self) -> bool {
        match self.raw(key::PROXY_PROTOCOL) {
            None => false,
            Some("*") => true,
            Some(value) => {
                self.invalid(key::PROXY_PROTOCOL, value, "only \"*\" is supported");
                false
            }
        }
    }

    fn access_log(&mut self) -> Option<AccessLog> {
        let enabled = self.bool(key::ACCESS_LOG_ENABLED);
        let emit_interval_minutes = self
            .raw(key::ACCESS_LOG_EMIT_INTERVAL)
            .and_then(|v| match v {
                "5" => Some(5),
                "60" => Some(60),
                _ => {
                    self.invalid(
                        key::ACCESS_LOG_EMIT_INTERVAL,
                        v,
                        "must be 5 or 60 (minutes)",
                    );
                    None
                }
            });
        let s3_bucket_name = self.string(key::ACCESS_LOG_S3_BUCKET_NAME);
        let s3_bucket_prefix = self
            .raw(key::ACCESS_LOG_S3_BUCKET_PREFIX)
            .map(str::to_owned);
        let any = [
            key::ACCESS_LOG_ENABLED,
            key::ACCESS_LOG_EMIT_INTERVAL,
            key::ACCESS_LOG_S3_BUCKET_NAME,
            key::ACCESS_LOG_S3_BUCKET_PREFIX,
        ]
        .iter()
        .any(|s| self.present(s));
        if !any {
            return None;
        }
        let enabled = enabled.unwrap_or(false);
        if enabled && s3_bucket_name.is_none() && !self.present(key::ACCESS_LOG_S3_BUCKET_NAME) {
            self.report(
                key::ACCESS_LOG_ENABLED,
                ProblemKind::Inconsistent,
                None,
                format!(
                    "access logs need {PREFIX}{}",
                    key::ACCESS_LOG_S3_BUCKET_NAME
                ),
            );
        }
        Some(AccessLog {
            enabled,
            emit_interval_minutes,
            s3_bucket_name,
            s3_bucket_prefix,
        })
    }

    fn connection_draining(&mut self) -> Option<u32> {
        let enabled = self.bool(key::CONNECTION_DRAINING_ENABLED);
        let timeout = self.int_in(key::CONNECTION_DRAINING_TIMEOUT, 1, 3600);
        match enabled {
            Some(true) => Some(timeout.unwrap_or(DEFAULT_CONNECTION_DRAINING_TIMEOUT)),
            _ => None,
        }
    }

    fn health_check(&mut self) -> HealthCheckOverrides {
        let protocol = self.raw(key::HC_PROTOCOL).and_then(|v| {
            let parsed = match v.to_ascii_uppercase().as_str() {
                "TCP" => Some(HealthCheckProtocol::Tcp),
                "HTTP" => Some(HealthCheckProtocol::Http),
                "HTTPS" => Some(HealthCheckProtocol::Https),
                _ => None,
            };
            if parsed.is_none() {
                self.invalid(key::HC_PROTOCOL, v, "must be TCP, HTTP or HTTPS");
            }
            parsed
        });
        let port = self.raw(key::HC_PORT).and_then(|v| {
            if v == "traffic-port" {
                return Some(HealthCheckPort::TrafficPort);
            }
            match v.parse::<u16>() {
                Ok(n) if n > 0 => Some(HealthCheckPort::Port(n)),
                _ => {
                    self.invalid(
                        key::HC_PORT,
                        v,
                        "must be traffic-port or a port in 1..=65535",
                    );
                    None
                }
            }
        });
        let path = self.raw(key::HC_PATH).and_then(|v| {
            if !v.starts_with('/') {
                self.invalid(key::HC_PATH, v, "must start with /");
                None
            } else if v.chars().count() > MAX_HEALTHCHECK_PATH_CHARS
                || v.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                self.invalid(
                    key::HC_PATH,
                    v,
                    format!(
                        "must be at most {MAX_HEALTHCHECK_PATH_CHARS} characters without whitespace"
                    ),
                );
                None
            } else {
                Some(v.to_owned())
            }
        });
        let healthy_threshold = self.int_in(key::HC_HEALTHY_THRESHOLD, 2, 10);
        let unhealthy_threshold = self.int_in(key::HC_UNHEALTHY_THRESHOLD, 2, 10);
        let timeout_seconds = self.int_in(key::HC_TIMEOUT, 2, 60);
        let interval_seconds = self.int_in(key::HC_INTERVAL, 5, 300);
        if let (Some(t), Some(i)) = (timeout_seconds, interval_seconds) {
            if t >= i {
                self.report(
                    key::HC_TIMEOUT,
                    ProblemKind::Inconsistent,
                    None,
                    format!("timeout ({t}s) must be shorter than the interval ({i}s)"),
                );
            }
        }
        HealthCheckOverrides {
            protocol,
            port,
            path,
            healthy_threshold,
            unhealthy_threshold,
            timeout_seconds,
            interval_seconds,
        }
    }

    fn target_group_attributes(&mut self) -> Vec<(String, bool)> {
        let Some((value, items)) = self.list(key::TARGET_GROUP_ATTRIBUTES) else {
            return Vec::new();
        };
        let mut out: Vec<(String, bool)> = Vec::new();
        for item in items {
            let Some((k, v)) = item.split_once('=') else {
                self.invalid(
                    key::TARGET_GROUP_ATTRIBUTES,
                    value,
                    format!("\"{}\" is not key=value", excerpt(item).escape_debug()),
                );
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            if !TARGET_GROUP_ATTRIBUTE_KEYS.contains(&k) {
                self.invalid(
                    key::TARGET_GROUP_ATTRIBUTES,
                    value,
                    format!(
                        "unsupported attribute \"{}\" (supported: {})",
                        excerpt(k).escape_debug(),
                        TARGET_GROUP_ATTRIBUTE_KEYS.join(", ")
                    ),
                );
                continue;
            }
            let flag = match v {
                "true" => true,
                "false" => false,
                _ => {
                    self.invalid(
                        key::TARGET_GROUP_ATTRIBUTES,
                        value,
                        format!("{k} must be true or false"),
                    );
                    continue;
                }
            };
            if out.iter().any(|(existing, _)| existing == k) {
                self.invalid(
                    key::TARGET_GROUP_ATTRIBUTES,
                    value,
                    format!("{k} is given more than once"),
                );
                continue;
            }
            out.push((k.to_owned(), flag));
        }
        out
    }

    fn private_ipv4_addresses(&mut self) -> Vec<Ipv4Addr> {
        let Some((value, items)) = self.list(key::PRIVATE_IPV4_ADDRESSES) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match item.parse::<Ipv4Addr>() {
                Ok(ip) => out.push(ip),
                Err(_) => self.invalid(
                    key::PRIVATE_IPV4_ADDRESSES,
                    value,
                    format!(
                        "\"{}\" is not an IPv4 address",
                        excerpt(item).escape_debug()
                    ),
                ),
            }
        }
        out
    }

    fn additional_tags(&mut self) -> BTreeMap<String, String> {
        let Some((value, pairs)) = self.key_values(key::ADDITIONAL_RESOURCE_TAGS) else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (k, v) in pairs {
            // Keys are user text: quoted cut and escaped, so a problem stays on one line.
            let shown_key = excerpt(k).escape_debug().to_string();
            let reason = if k.chars().count() > MAX_TAG_KEY_CHARS {
                Some(format!(
                    "tag key \"{shown_key}\" is longer than {MAX_TAG_KEY_CHARS} characters"
                ))
            } else if v.chars().count() > MAX_TAG_VALUE_CHARS {
                Some(format!(
                    "value of tag \"{shown_key}\" is longer than {MAX_TAG_VALUE_CHARS} characters"
                ))
            } else if k.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:")) {
                Some(format!(
                    "tag key \"{shown_key}\" uses the reserved aws: prefix"
                ))
            } else {
                None
            };
            match reason {
                Some(reason) => self.invalid(key::ADDITIONAL_RESOURCE_TAGS, value, reason),
                None => {
                    out.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        if out.len() > MAX_TAGS {
            self.invalid(
                key::ADDITIONAL_RESOURCE_TAGS,
                value,
                format!("{} tags given, at most {MAX_TAGS} allowed", out.len()),
            );
        }
        out
    }

    fn subnets(&mut self) -> Vec<String> {
        let Some((value, items)) = self.list(key::SUBNETS) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut bad = false;
        for item in items {
            if item.starts_with("subnet-") && !is_aws_id(item, "subnet-") {
                bad = true;
                self.invalid(
                    key::SUBNETS,
                    value,
                    format!(
                        "\"{}\" is not a valid subnet ID",
                        excerpt(item).escape_debug()
                    ),
                );
            } else {
                out.push(item.to_owned());
            }
        }
        if out.is_empty() && !bad {
            self.invalid(key::SUBNETS, value, "lists no subnet");
        }
        out
    }

    fn target_node_labels(&mut self) -> BTreeMap<String, String> {
        let Some((value, pairs)) = self.key_values(key::TARGET_NODE_LABELS) else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (k, v) in pairs {
            if k.chars().any(char::is_whitespace) || v.chars().any(char::is_whitespace) {
                self.invalid(
                    key::TARGET_NODE_LABELS,
                    value,
                    format!(
                        "label \"{}\" contains whitespace",
                        excerpt(k).escape_debug()
                    ),
                );
            } else {
                out.insert(k.to_owned(), v.to_owned());
            }
        }
        out
    }
}

/// Whether a problem is only a warning: upstream ignores unknown keys (the AWS Load Balancer
/// Controller shares the prefix) and keys of the other kind — except extra security groups on
/// an NLB, which it rejects.
fn is_ignorable(suffix: &str, kind: ProblemKind) -> bool {
    match kind {
        ProblemKind::UnknownKey => true,
        ProblemKind::NotApplicable => suffix != key::EXTRA_SECURITY_GROUPS,
        _ => false,
    }
}

/// Internal scheme unless the annotation is absent, empty or exactly `false` (upstream rule).
fn parse_internal(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(&format!("{PREFIX}{}", key::INTERNAL))
        .is_some_and(|v| !v.is_empty() && v != "false")
}

/// Parses and validates the load-balancer annotations of a Service.
///
/// Services of `type` `nlb-ip` or `external` belong to another controller: they yield
/// [`LbKind::Elsewhere`] with every other field at its default, and nothing is validated.
pub fn parse(annotations: &BTreeMap<String, String>) -> Result<LbAnnotations, AnnotationErrors> {
    let internal = parse_internal(annotations);
    let type_value = annotations.get(&format!("{PREFIX}{}", key::TYPE));
    if matches!(type_value.map(String::as_str), Some("nlb-ip" | "external")) {
        return Ok(LbAnnotations::empty(LbKind::Elsewhere, internal));
    }

    // Unknown keys and hostile sizes are reported first, so nothing oversized is parsed further.
    let mut p = Parser(AnnotationReader::new(TABLE, annotations));

    let kind = match p.raw(key::TYPE) {
        None => Some(LbKind::Classic),
        Some("nlb") => Some(LbKind::Network),
        Some("none") => Some(LbKind::TargetGroupsOnly),
        Some(other) => {
            p.invalid(
                key::TYPE,
                other,
                "must be nlb, nlb-ip, external or none (or absent for a Classic ELB)",
            );
            None
        }
    };
    // An oversized `type` leaves the kind unknown too.
    let kind = if p.is_oversized(key::TYPE) {
        None
    } else {
        kind
    };

    let mut out = LbAnnotations::empty(kind.unwrap_or(LbKind::Classic), internal);
    out.ssl = p.ssl();
    out.backend_protocol = p.backend_protocol(kind == Some(LbKind::TargetGroupsOnly));
    out.proxy_protocol = p.proxy_protocol();
    out.access_log = p.access_log();
    out.connection_draining = p.connection_draining();
    out.idle_timeout = p.int_in(key::CONNECTION_IDLE_TIMEOUT, 1, 4000);
    out.cross_zone = p.bool(key::CROSS_ZONE);
    out.security_groups = p.ids(key::SECURITY_GROUPS, "sg-");
    out.extra_security_groups = p.ids(key::EXTRA_SECURITY_GROUPS, "sg-");
    out.health_check = p.health_check();
    out.target_group_attributes = p.target_group_attributes();
    out.eip_allocations = p.ids(key::EIP_ALLOCATIONS, "eipalloc-");
    out.private_ipv4_addresses = p.private_ipv4_addresses();
    out.additional_tags = p.additional_tags();
    out.subnets = p.subnets();
    out.target_node_labels = p.target_node_labels();

    // Annotations that belong to the other kind of load balancer.
    let foreign = match kind {
        Some(LbKind::Network) => Some((
            CLASSIC_ONLY_SUFFIXES,
            ProblemKind::NotApplicable,
            "only applies to a Classic ELB, not to type nlb",
        )),
        Some(LbKind::Classic) => Some((
            NETWORK_ONLY_SUFFIXES,
            ProblemKind::NotApplicable,
            "only applies to type nlb, not to a Classic ELB",
        )),
        Some(LbKind::TargetGroupsOnly) => Some((
            CLASSIC_ONLY_SUFFIXES,
            ProblemKind::NotApplicable,
            "only applies to a Classic ELB, not to type none (target groups only)",
        )),
        Some(LbKind::Elsewhere) | None => None,
    };
    if let Some((suffixes, problem, reason)) = foreign {
        let used: Vec<&str> = suffixes.iter().copied().filter(|s| p.present(s)).collect();
        for suffix in used {
            p.report(suffix, problem, None, reason.to_owned());
        }
    }

    let eips_given = p.present(key::EIP_ALLOCATIONS) && !p.is_oversized(key::EIP_ALLOCATIONS);
    let subnets_given = p.present(key::SUBNETS) && !p.is_oversized(key::SUBNETS);
    if eips_given && subnets_given && out.eip_allocations.len() != out.subnets.len() {
        p.report(
            key::EIP_ALLOCATIONS,
            ProblemKind::Inconsistent,
            None,
            format!(
                "{} allocation(s) for {} subnet(s): give exactly one per subnet",
                out.eip_allocations.len(),
                out.subnets.len()
            ),
        );
    }

    out.ignored = p.0.finish()?;
    Ok(out)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests;
