//! The Classic ELB client's values, shaped as AWS has them: a listener, a health check, the
//! attributes Stratus manages, and the name of the PROXY-protocol policy the client makes.

/// Name of the backend policy that turns on the PROXY protocol.
pub const PROXY_PROTOCOL_POLICY: &str = "k8s-proxyprotocol-enabled";

/// One listener, with protocols in the upper case AWS reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassicListener {
    /// Load-balancer port.
    pub port: i32,
    /// Load-balancer protocol (`TCP`, `HTTP`, `SSL`, `HTTPS`).
    pub protocol: String,
    /// Instance (node) port.
    pub instance_port: i32,
    /// Instance protocol.
    pub instance_protocol: String,
    /// Certificate ARN of a TLS listener.
    pub certificate: Option<String>,
}

/// A Classic ELB health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// `PROTOCOL:PORT[/PATH]`.
    pub target: String,
    /// Healthy threshold.
    pub healthy_threshold: i32,
    /// Unhealthy threshold.
    pub unhealthy_threshold: i32,
    /// Timeout in seconds.
    pub timeout: i32,
    /// Interval in seconds.
    pub interval: i32,
}

/// Access-log settings of a Classic ELB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogSettings {
    /// Minutes between log files.
    pub interval: i32,
    /// The bucket.
    pub bucket: String,
    /// The key prefix.
    pub prefix: String,
}

/// The attributes Stratus manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicAttributes {
    /// Cross-zone load balancing.
    pub cross_zone: bool,
    /// Connection-draining timeout in seconds; `None` = draining off.
    pub draining: Option<i32>,
    /// Idle timeout in seconds.
    pub idle_timeout: i32,
    /// Access logs, when on.
    pub access_log: Option<AccessLogSettings>,
}
