//! The AWS cloud config (`--cloud-config`): the upstream gcfg INI file, parsed and validated.
//!
//! Same file format as kubernetes/cloud-provider-aws (`pkg/providers/v1/config`): a `[Global]`
//! section and any number of `[ServiceOverride "name"]` sections; section and key names are
//! case-insensitive. Unlike upstream, which ignores unknown keys and lets the last of two
//! assignments win, every problem here is an error, and [`CloudConfig::parse`] reports all of
//! them at once. Parsing (text to raw sections, module `ini`) is kept apart from validation
//! (raw sections to the typed config, module `validate`).

#[cfg(test)]
mod tests;
mod validate;
mod values;

use std::path::Path;

pub use stratus_cloud_kit::gcfg::ConfigErrors;

/// Default port of the shared health probe (kube-proxy's health port).
pub const DEFAULT_SHARED_HEALTH_PROBE_PORT: u16 = 10256;

/// Default path of the shared health probe.
pub const DEFAULT_SHARED_HEALTH_PROBE_PATH: &str = "/healthz";

/// The whole cloud config. `Default` is what an empty file means.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloudConfig {
    /// The `[Global]` section.
    pub global: GlobalConfig,
    /// The `[ServiceOverride "name"]` sections, in the order they first appear.
    pub service_overrides: Vec<ServiceOverride>,
}

/// The `[Global]` section. Keys left empty (`Key =`) count as not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalConfig {
    /// `Zone`: the availability zone the controller runs in (e.g. `us-east-1a`).
    pub zone: Option<String>,
    /// `Region`: the AWS region (e.g. `us-east-1`); see [`CloudConfig::region`].
    pub region: Option<String>,
    /// `VPC`: the VPC to use when not running on an EC2 instance of the cluster.
    pub vpc: Option<String>,
    /// `SubnetID`: the subnet to use for load balancers.
    pub subnet_id: Option<String>,
    /// `RouteTableID`: the route table to use.
    pub route_table_id: Option<String>,
    /// `RoleARN`: an IAM role to assume for AWS API calls.
    pub role_arn: Option<String>,
    /// `SourceARN`: the `aws:SourceArn` passed when assuming `RoleARN`.
    pub source_arn: Option<String>,
    /// `KubernetesClusterTag`: the legacy cluster ID (tag `KubernetesCluster=<id>`).
    pub kubernetes_cluster_tag: Option<String>,
    /// `KubernetesClusterID`: the cluster ID (tag `kubernetes.io/cluster/<id>`).
    pub kubernetes_cluster_id: Option<String>,
    /// `DisableSecurityGroupIngress`: do not add ingress rules for load balancers to node groups.
    pub disable_security_group_ingress: bool,
    /// `ElbSecurityGroup`: one security group for every ELB instead of one per ELB.
    pub elb_security_group: Option<String>,
    /// `NodeIPFamilies` (repeatable): address families put on nodes, in order; default `[Ipv4]`.
    pub node_ip_families: Vec<IpFamily>,
    /// `ClusterServiceLoadBalancerHealthProbeMode`; default [`HealthProbeMode::ServiceNodePort`].
    pub health_probe_mode: HealthProbeMode,
    /// `ClusterServiceSharedLoadBalancerHealthProbePort`; default 10256 (also when set to 0).
    pub shared_health_probe_port: u16,
    /// `ClusterServiceSharedLoadBalancerHealthProbePath`; default `/healthz`.
    pub shared_health_probe_path: String,
    /// `SupportedTopologyInstanceTypePattern`: a regular expression known to compile.
    pub supported_topology_instance_type_pattern: Option<String>,
    /// `NLBSecurityGroupMode`: `Managed`, or not set.
    pub nlb_security_group_mode: Option<NlbSecurityGroupMode>,
    /// `PublicNetworkAllowList` (Deckhouse's key, written `publicNetworkAllowList`; keys match
    /// case-insensitively as in upstream's gcfg): CIDRs that replace "everywhere" in a network
    /// load balancer's client rules when its Service names no narrower source range.
    pub public_network_allow_list: Vec<String>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        GlobalConfig {
            zone: None,
            region: None,
            vpc: None,
            subnet_id: None,
            route_table_id: None,
            role_arn: None,
            source_arn: None,
            kubernetes_cluster_tag: None,
            kubernetes_cluster_id: None,
            disable_security_group_ingress: false,
            elb_security_group: None,
            node_ip_families: vec![IpFamily::Ipv4],
            health_probe_mode: HealthProbeMode::default(),
            shared_health_probe_port: DEFAULT_SHARED_HEALTH_PROBE_PORT,
            shared_health_probe_path: DEFAULT_SHARED_HEALTH_PROBE_PATH.to_owned(),
            supported_topology_instance_type_pattern: None,
            nlb_security_group_mode: None,
            public_network_allow_list: Vec::new(),
        }
    }
}

/// One `[ServiceOverride "name"]` section: a custom endpoint for one service in one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOverride {
    /// The section's name (the `"name"` part, usually a number).
    pub name: String,
    /// `Service`, trimmed and lower-cased (`ec2`, `elb`, `elasticloadbalancing`, `kms`, ...).
    pub service: String,
    /// `Region`, trimmed: the region whose calls go to [`ServiceOverride::url`].
    pub region: String,
    /// `URL`: an `http://` or `https://` endpoint URL.
    pub url: String,
    /// `SigningRegion`: the region requests are signed for.
    pub signing_region: String,
    /// `SigningMethod` (kept for compatibility; the Go SDK v2 ignores it).
    pub signing_method: Option<String>,
    /// `SigningName`: the service name requests are signed for.
    pub signing_name: Option<String>,
}

/// An IP address family of node addresses (`ipv4` / `ipv6` in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// `ipv4`
    Ipv4,
    /// `ipv6`
    Ipv6,
}

impl IpFamily {
    /// The spelling used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::Ipv4 => "ipv4",
            IpFamily::Ipv6 => "ipv6",
        }
    }
}

/// How load balancers of `externalTrafficPolicy: Cluster` services probe nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HealthProbeMode {
    /// `ServiceNodePort`: probe each service's own node port (the default).
    #[default]
    ServiceNodePort,
    /// `Shared`: probe one shared HTTP endpoint on each node (kube-proxy's `/healthz:10256`).
    Shared,
}

impl HealthProbeMode {
    /// The spelling used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthProbeMode::ServiceNodePort => "ServiceNodePort",
            HealthProbeMode::Shared => "Shared",
        }
    }
}

/// Who manages the security groups of NLB services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NlbSecurityGroupMode {
    /// `Managed`: the controller creates and manages one security group per NLB service.
    Managed,
}

impl NlbSecurityGroupMode {
    /// The spelling used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            NlbSecurityGroupMode::Managed => "Managed",
        }
    }
}

impl CloudConfig {
    /// Parses and validates config text, reporting every problem found (never just the first).
    pub fn parse(text: &str) -> Result<CloudConfig, ConfigErrors> {
        stratus_cloud_kit::gcfg::parse_with(text, validate::validate)
    }

    /// Reads and parses the config file at `path`; an unreadable file is one problem naming the
    /// path and the OS error.
    pub fn load(path: &Path) -> Result<CloudConfig, ConfigErrors> {
        stratus_cloud_kit::gcfg::load_with(path, validate::validate)
    }

    /// The region: `Region` if set, else the region of `Zone` (`us-east-1a` → `us-east-1`),
    /// else `None` (the caller then asks the instance metadata service).
    pub fn region(&self) -> Option<String> {
        self.global.region.clone().or_else(|| {
            self.global
                .zone
                .as_deref()
                .and_then(values::zone_region)
                .map(str::to_owned)
        })
    }

    /// The cluster ID: `KubernetesClusterID`, else the legacy `KubernetesClusterTag`.
    ///
    /// Validation guarantees the two agree when both are set.
    pub fn cluster_id(&self) -> Option<&str> {
        self.global
            .kubernetes_cluster_id
            .as_deref()
            .or(self.global.kubernetes_cluster_tag.as_deref())
    }

    /// Whether resources are found by the legacy `KubernetesCluster` tag: upstream does so
    /// whenever `KubernetesClusterTag` is set, even when `KubernetesClusterID` is set too.
    pub fn uses_legacy_cluster_tag(&self) -> bool {
        self.global.kubernetes_cluster_tag.is_some()
    }

    /// The override for `service` in `region`, if any. Services match case-insensitively and
    /// by alias (`elb` = `elasticloadbalancing` = `Elastic Load Balancing`); regions exactly.
    pub fn endpoint_override(&self, service: &str, region: &str) -> Option<&ServiceOverride> {
        let wanted = values::canonical_service(service);
        self.service_overrides
            .iter()
            .find(|o| o.region == region && values::canonical_service(&o.service) == wanted)
    }
}
