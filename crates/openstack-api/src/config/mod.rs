//! The OpenStack cloud config (`--cloud-config`): the gcfg `cloud.conf` of
//! openstack-cloud-controller-manager, parsed and validated, with clouds.yaml support.
//!
//! Same sections and keys as upstream (`[Global]`, `[Networking]`, `[LoadBalancer]`,
//! `[LoadBalancerClass "name"]`, `[Route]`, `[Metadata]`, `[BlockStorage]`); section and key names
//! are case-insensitive. Unlike upstream, which ignores unknown keys, every problem is an error and
//! all of them are reported at once with their lines. Sections used by later controllers (load
//! balancers, routes, block storage) are parsed and checked now.

mod clouds;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stratus_cloud::Cidr;
pub use stratus_cloud_kit::gcfg::{ConfigErrors, ConfigProblem};

/// A secret from the config (password, application credential secret): never printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that sends it (the Keystone request body).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "<redacted>"
        })
    }
}

/// Which interface of each catalog endpoint is used (`os-endpoint-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    /// `public` (the default).
    #[default]
    Public,
    /// `internal`.
    Internal,
    /// `admin`.
    Admin,
}

impl Interface {
    /// `public`, `internal` or `admin`, with or without the `URL` suffix of `os-endpoint-type`
    /// (`internalURL`); None for anything else.
    pub fn parse(text: &str) -> Option<Interface> {
        match text.trim().trim_end_matches("URL") {
            "public" => Some(Interface::Public),
            "internal" => Some(Interface::Internal),
            "admin" => Some(Interface::Admin),
            _ => None,
        }
    }

    /// The catalog's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }
}

/// A name or an ID, as Keystone references users, projects and domains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// By ID.
    Id(String),
    /// By name.
    Name(String),
}

/// How the CCM authenticates to Keystone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A user's password, scoped to a project.
    Password {
        /// The user (a name comes with its domain).
        user: Named,
        /// The user's domain when the user is named.
        user_domain: Option<Named>,
        /// The password.
        password: Secret,
        /// The project the token is scoped to.
        project: Named,
        /// The project's domain when the project is named.
        project_domain: Option<Named>,
    },
    /// An application credential (already scoped to its project).
    ApplicationCredential {
        /// The credential, by ID, or by name with its user.
        credential: Named,
        /// The owner, when the credential is named.
        user: Option<Named>,
        /// The owner's domain, when the user is named.
        user_domain: Option<Named>,
        /// The secret.
        secret: Secret,
    },
}

/// TLS towards the OpenStack APIs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsOptions {
    /// `ca-file`: extra trusted CAs (PEM).
    pub ca_file: Option<PathBuf>,
    /// Extra trusted CAs as PEM text (Deckhouse's `connection.caCert`), besides `ca_file`.
    pub ca_pem: Option<String>,
    /// `cert-file` / `key-file`: a client certificate.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// `tls-insecure`: accept any server certificate.
    pub insecure: bool,
}

/// `[Global]`: where Keystone is and who the CCM is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalConfig {
    /// `auth-url`: Keystone's endpoint (`https://keystone:5000/v3`).
    pub auth_url: String,
    /// The credentials.
    pub credentials: Credentials,
    /// `region`: the region of every endpoint taken from the catalog (any when unset).
    pub region: Option<String>,
    /// `os-endpoint-type`.
    pub interface: Interface,
    /// TLS settings.
    pub tls: TlsOptions,
}

/// `[Networking]`: how node addresses are classified.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkingConfig {
    /// `ipv6-support-disabled`: leave IPv6 addresses out.
    pub ipv6_support_disabled: bool,
    /// `public-network-name` (repeatable): addresses on these networks are ExternalIP.
    pub public_network_names: Vec<String>,
    /// `internal-network-name` (repeatable): when set, only addresses on these networks are
    /// InternalIP; others are left out.
    pub internal_network_names: Vec<String>,
    /// `address-sort-order`: CIDRs whose addresses come first, in this order.
    pub address_sort_order: Vec<Cidr>,
}

/// How members of an Octavia pool are picked (`lb-method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LbMethod {
    /// `ROUND_ROBIN` (the default).
    #[default]
    RoundRobin,
    /// `LEAST_CONNECTIONS`.
    LeastConnections,
    /// `SOURCE_IP`.
    SourceIp,
    /// `SOURCE_IP_PORT`.
    SourceIpPort,
}

/// `[LoadBalancer]` (used by the load-balancer controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerConfig {
    /// `enabled` (default true).
    pub enabled: bool,
    /// `subnet-id`: the VIP subnet.
    pub subnet_id: Option<String>,
    /// `member-subnet-id`: the members' subnet.
    pub member_subnet_id: Option<String>,
    /// `network-id`: the VIP network.
    pub network_id: Option<String>,
    /// `floating-network-id`: where floating IPs come from.
    pub floating_network_id: Option<String>,
    /// `floating-subnet-id`.
    pub floating_subnet_id: Option<String>,
    /// `floating-subnet`: a subnet name pattern.
    pub floating_subnet: Option<String>,
    /// `floating-subnet-tags`.
    pub floating_subnet_tags: Option<String>,
    /// `lb-method`.
    pub lb_method: LbMethod,
    /// `lb-provider` (`amphora`, `octavia` or `ovn`; default `amphora`).
    pub lb_provider: String,
    /// `create-monitor` (default false).
    pub create_monitor: bool,
    /// `monitor-delay` (default 5s).
    pub monitor_delay: Duration,
    /// `monitor-timeout` (default 3s).
    pub monitor_timeout: Duration,
    /// `monitor-max-retries` (default 1).
    pub monitor_max_retries: u32,
    /// `monitor-max-retries-down` (default 3).
    pub monitor_max_retries_down: u32,
    /// `manage-security-groups` (default false).
    pub manage_security_groups: bool,
    /// `internal-lb` (default false).
    pub internal_lb: bool,
    /// `node-selector`: `key=value` pairs target nodes must carry.
    pub node_selector: BTreeMap<String, String>,
    /// `cascade-delete` (default true).
    pub cascade_delete: bool,
    /// `flavor-id`.
    pub flavor_id: Option<String>,
    /// `availability-zone`.
    pub availability_zone: Option<String>,
    /// `enable-ingress-hostname` (default false).
    pub enable_ingress_hostname: bool,
    /// `ingress-hostname-suffix` (default `nip.io`).
    pub ingress_hostname_suffix: String,
    /// `max-shared-lb` (default 2).
    pub max_shared_lb: u32,
    /// `container-store` (`barbican` or `external`; default `barbican`).
    pub container_store: String,
    /// `provider-requires-serial-api-calls` (default false).
    pub provider_requires_serial_api_calls: bool,
    /// `default-tls-container-ref`.
    pub default_tls_container_ref: Option<String>,
}

impl Default for LoadBalancerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            subnet_id: None,
            member_subnet_id: None,
            network_id: None,
            floating_network_id: None,
            floating_subnet_id: None,
            floating_subnet: None,
            floating_subnet_tags: None,
            lb_method: LbMethod::RoundRobin,
            lb_provider: "amphora".into(),
            create_monitor: false,
            monitor_delay: Duration::from_secs(5),
            monitor_timeout: Duration::from_secs(3),
            monitor_max_retries: 1,
            monitor_max_retries_down: 3,
            manage_security_groups: false,
            internal_lb: false,
            node_selector: BTreeMap::new(),
            cascade_delete: true,
            flavor_id: None,
            availability_zone: None,
            enable_ingress_hostname: false,
            ingress_hostname_suffix: "nip.io".into(),
            max_shared_lb: 2,
            container_store: "barbican".into(),
            provider_requires_serial_api_calls: false,
            default_tls_container_ref: None,
        }
    }
}

/// One `[LoadBalancerClass "name"]`: network overrides a Service picks by annotation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadBalancerClass {
    /// `floating-network-id`.
    pub floating_network_id: Option<String>,
    /// `floating-subnet-id`.
    pub floating_subnet_id: Option<String>,
    /// `floating-subnet`.
    pub floating_subnet: Option<String>,
    /// `floating-subnet-tags`.
    pub floating_subnet_tags: Option<String>,
    /// `network-id`.
    pub network_id: Option<String>,
    /// `subnet-id`.
    pub subnet_id: Option<String>,
    /// `member-subnet-id`.
    pub member_subnet_id: Option<String>,
}

/// Where instance metadata is read from (`search-order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataSource {
    /// `configDrive`.
    ConfigDrive,
    /// `metadataService`.
    MetadataService,
}

/// `[Metadata]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataConfig {
    /// `search-order` (default `configDrive,metadataService`).
    pub search_order: Vec<MetadataSource>,
    /// `request-timeout`: timeout of every OpenStack API request (default 60s, as upstream).
    pub request_timeout: Duration,
}

impl Default for MetadataConfig {
    fn default() -> Self {
        Self {
            search_order: vec![MetadataSource::ConfigDrive, MetadataSource::MetadataService],
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// `[BlockStorage]` (used by the Cinder CSI driver).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockStorageConfig {
    /// `node-volume-attach-limit` (default 256).
    pub node_volume_attach_limit: Option<u32>,
    /// `rescan-on-resize`.
    pub rescan_on_resize: bool,
    /// `ignore-volume-az`.
    pub ignore_volume_az: bool,
    /// `ignore-volume-microversion`.
    pub ignore_volume_microversion: bool,
}

/// The whole cloud config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackConfig {
    /// `[Global]`.
    pub global: GlobalConfig,
    /// `[Networking]`.
    pub networking: NetworkingConfig,
    /// `[LoadBalancer]`.
    pub load_balancer: LoadBalancerConfig,
    /// `[LoadBalancerClass "name"]` sections by name.
    pub load_balancer_classes: BTreeMap<String, LoadBalancerClass>,
    /// `[Route] router-id`: the Neutron router holding pod routes.
    pub router_id: Option<String>,
    /// `[Metadata]`.
    pub metadata: MetadataConfig,
    /// `[BlockStorage]`.
    pub block_storage: BlockStorageConfig,
}

impl OpenStackConfig {
    /// Parses and validates config text; `clouds.yaml` (with `use-clouds`) is read through
    /// `read_file`. Every problem is reported, never just the first.
    pub fn parse_with(
        text: &str,
        read_file: &dyn Fn(&Path) -> std::io::Result<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OpenStackConfig, ConfigErrors> {
        let raw = stratus_cloud_kit::gcfg::parse_with(text, validate::validate)?;
        raw.resolve(read_file, env)
    }

    /// Parses config text, reading `clouds.yaml` from disk and the process environment.
    pub fn parse(text: &str) -> Result<OpenStackConfig, ConfigErrors> {
        OpenStackConfig::parse_with(text, &|p: &Path| std::fs::read_to_string(p), &|k: &str| {
            std::env::var(k).ok()
        })
    }

    /// Reads and parses the config file at `path`.
    pub fn load(path: &Path) -> Result<OpenStackConfig, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigProblem::new(format!(
                "cannot read {}: {e}",
                path.display()
            ))])
        })?;
        OpenStackConfig::parse(&text)
    }
}
