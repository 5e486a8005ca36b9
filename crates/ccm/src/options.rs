//! Command-line flags, compatible with the upstream cloud-controller-manager's names.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};
use stratus_cloud::ProviderOptions;
use stratus_election::LeaderElectionArgs;
use stratus_kube_kit::KubeClientArgs;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;
use stratus_serving::ServingArgs;

use crate::pod_network::{
    parse_allocator_type, parse_cluster_cidrs, pod_network, ClusterCidrs, MaskFlags, PodNetwork,
};
use crate::tagging_flags::{NodeIpamArgs, TaggingArgs};

/// Upstream flags Stratus does not implement: refused by name instead of silently ignored.
const UNIMPLEMENTED_UPSTREAM_FLAGS: &[&str] = &[
    "leader-elect-resource-lock",
    "concurrent-node-status-updates",
    "external-cloud-volume-plugin",
    "kube-api-qps",
    "kube-api-burst",
    "kube-api-content-type",
    "feature-gates",
    "webhooks",
    "webhook-secure-port",
    "profiling",
    "contention-profiling",
    "min-resync-period",
    "controller-start-interval",
    "node-sync-period",
    "log-flush-frequency",
    "vmodule",
    // Secure serving: client certificates and front-proxy headers are not trusted, HTTP/2 is not
    // served.
    "client-ca-file",
    "requestheader-client-ca-file",
    "requestheader-allowed-names",
    "requestheader-username-headers",
    "requestheader-uid-headers",
    "requestheader-group-headers",
    "requestheader-extra-headers-prefix",
    "authentication-tolerate-lookup-failure",
    "tls-sni-cert-key",
    "http2-max-streams-per-connection",
    "permit-port-sharing",
    "permit-address-sharing",
];

/// Flags of `cloud-controller-manager`. Groups owned by other crates are flattened in: the
/// Kubernetes client, leader election, secure serving and logging.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cloud-controller-manager",
    version = stratus_runtime::build_info::version(),
    about = "Stratus cloud-controller-manager",
    // As pflag: a flag given twice takes the last value.
    args_override_self = true
)]
pub struct Options {
    /// The cloud provider (one of those this build registers, e.g. `aws`).
    #[arg(long = "cloud-provider")]
    pub cloud_provider: String,
    /// Path to the cloud provider configuration file (INI).
    #[arg(long = "cloud-config")]
    pub cloud_config: Option<PathBuf>,
    /// How to reach the apiserver.
    #[command(flatten)]
    pub client: KubeClientArgs,
    /// Instance prefix of the cluster.
    #[arg(long = "cluster-name", default_value = "kubernetes")]
    pub cluster_name: String,
    /// Controllers to run: `*` for all on by default, `name` to enable, `-name` to disable.
    #[arg(long, default_value = "*", value_delimiter = ',')]
    pub controllers: Vec<String>,
    /// Nodes initialised concurrently.
    #[arg(long = "concurrent-node-syncs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_node_syncs: u16,
    /// How often node addresses are refreshed from the cloud.
    #[arg(long = "node-status-update-frequency", default_value = "5m0s", value_parser = parse_go_duration)]
    pub node_status_update_frequency: Duration,
    /// How often the node-lifecycle controller checks nodes.
    #[arg(long = "node-monitor-period", default_value = "5s", value_parser = parse_go_duration)]
    pub node_monitor_period: Duration,
    /// Allow running without a cluster ID (instances not scoped by tag).
    #[arg(long = "allow-untagged-cloud", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub allow_untagged_cloud: bool,
    /// Logging.
    #[command(flatten)]
    pub logging: LoggingArgs,
    /// Leader election.
    #[command(flatten)]
    pub election: LeaderElectionArgs,
    /// Run the controllers listed for migration under the migration Lease shared with
    /// kube-controller-manager (upstream's default configuration unless --leader-migration-config).
    #[arg(long = "enable-leader-migration", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub enable_leader_migration: bool,
    /// A LeaderMigrationConfiguration file (controllermanager.config.k8s.io); implies nothing
    /// without --enable-leader-migration.
    #[arg(long = "leader-migration-config")]
    pub leader_migration_config: Option<PathBuf>,
    /// Each controller uses its own ServiceAccount in kube-system (node-controller,
    /// service-controller, route-controller) with short-lived tokens.
    #[arg(long = "use-service-account-credentials", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub use_service_account_credentials: bool,
    /// Services whose load balancers are synced concurrently.
    #[arg(long = "concurrent-service-syncs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_service_syncs: u16,
    /// Stratus: how often load balancers of deleted Services are looked for and removed.
    #[arg(long = "load-balancer-reaper-period", default_value = "10m0s", value_parser = parse_go_duration)]
    pub load_balancer_reaper_period: Duration,
    /// Stratus: how long a changed node set must hold still before targets are updated.
    #[arg(long = "node-churn-quiet-period", default_value = "1s", value_parser = parse_go_duration)]
    pub node_churn_quiet_period: Duration,
    /// Stratus: how often the provider's shared instance view is listed again in full (NotReady
    /// nodes' instances are looked at every --node-monitor-period besides).
    #[arg(long = "instance-cache-refresh-period", default_value = "5m0s", value_parser = parse_go_duration)]
    pub instance_cache_refresh_period: Duration,
    /// Whether the route controller keeps cloud routes for node pod CIDRs (needs --cluster-cidr).
    #[arg(long = "configure-cloud-routes", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub configure_cloud_routes: bool,
    /// How often the route controller reconciles routes (besides reacting to Node changes).
    #[arg(long = "route-reconciliation-period", default_value = "10s", value_parser = parse_go_duration)]
    pub route_reconciliation_period: Duration,
    /// CIDR range of pods: one CIDR, or one IPv4 and one IPv6 CIDR, comma-separated.
    #[arg(long = "cluster-cidr", default_value = "", value_parser = parse_cluster_cidrs)]
    pub cluster_cidr: ClusterCidrs,
    /// Whether the node-ipam controller gives nodes pod CIDRs from --cluster-cidr.
    #[arg(long = "allocate-node-cidrs", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub allocate_node_cidrs: bool,
    /// The pod CIDR allocator: only RangeAllocator.
    #[arg(long = "cidr-allocator-type", default_value = "RangeAllocator", value_parser = parse_allocator_type)]
    pub cidr_allocator_type: String,
    /// Node pod CIDR mask size of a single-stack cluster (default 24 for IPv4, 64 for IPv6).
    #[arg(long = "node-cidr-mask-size", value_parser = clap::value_parser!(u8).range(1..=128))]
    pub node_cidr_mask_size: Option<u8>,
    /// Node pod CIDR mask size for the IPv4 cluster CIDR [default: 24].
    #[arg(long = "node-cidr-mask-size-ipv4", value_parser = clap::value_parser!(u8).range(1..=32))]
    pub node_cidr_mask_size_ipv4: Option<u8>,
    /// Node pod CIDR mask size for the IPv6 cluster CIDR [default: 64].
    #[arg(long = "node-cidr-mask-size-ipv6", value_parser = clap::value_parser!(u8).range(1..=128))]
    pub node_cidr_mask_size_ipv6: Option<u8>,
    /// Secure serving of /healthz, /livez, /readyz and /metrics.
    #[command(flatten)]
    pub serving: ServingArgs,
    /// The tagging controller (cloud-provider-aws).
    #[command(flatten)]
    pub tagging: TaggingArgs,
    /// The nodeipam controller's options (cloud-provider-aws).
    #[command(flatten)]
    pub nodeipam: NodeIpamArgs,
}

/// The cloud-controller-manager's secure port, as upstream.
pub const SECURE_PORT: u16 = 10258;

/// The main Lease's default name.
pub const DEFAULT_LEASE: &str = "cloud-controller-manager";

impl Options {
    /// The pod-network flags checked together; the error names the flag.
    pub fn pod_network(&self) -> Result<PodNetwork, String> {
        pod_network(
            &self.cluster_cidr,
            self.allocate_node_cidrs,
            MaskFlags {
                legacy: self.node_cidr_mask_size,
                ipv4: self.node_cidr_mask_size_ipv4,
                ipv6: self.node_cidr_mask_size_ipv6,
            },
        )
    }

    /// The main Lease's name (`--leader-elect-resource-name`).
    pub fn lease_name(&self) -> String {
        self.election.lease_name(DEFAULT_LEASE)
    }

    /// What the provider is told besides its config file.
    pub fn provider_options(&self) -> ProviderOptions {
        ProviderOptions {
            config_path: self.cloud_config.clone(),
            cluster_name: self.cluster_name.clone(),
            allow_untagged_cloud: self.allow_untagged_cloud,
            cache_refresh_period: self.instance_cache_refresh_period,
        }
    }
}

/// Rejects upstream flags we do not implement, with a message naming them.
pub fn refuse_unimplemented(args: &[String]) -> Result<(), String> {
    let refused: Vec<String> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .filter(|name| UNIMPLEMENTED_UPSTREAM_FLAGS.contains(&name.as_str()))
        .map(|name| format!("--{name}"))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "error: {} {} of the upstream cloud-controller-manager that Stratus does not implement yet; remove {} to continue",
            refused.join(", "),
            if refused.len() == 1 { "is a flag" } else { "are flags" },
            if refused.len() == 1 { "it" } else { "them" },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::enabled_controllers;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("ccm").chain(args.iter().copied()))
    }

    #[test]
    fn parses_upstream_flags() {
        let o = parse(&[
            "--cloud-provider=aws",
            "--cloud-config=/etc/aws.conf",
            "--controllers=*,-route",
            "--concurrent-node-syncs=4",
            "--node-status-update-frequency=1m",
            "--node-monitor-period=10s",
            "--allow-untagged-cloud",
            "--v=2",
        ])
        .unwrap();
        assert_eq!(o.cloud_provider, "aws");
        assert_eq!(o.concurrent_node_syncs, 4);
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(60));
        assert_eq!(o.node_monitor_period, Duration::from_secs(10));
        assert!(o.allow_untagged_cloud);
        assert_eq!(o.logging.verbosity, 2);
        assert_eq!(o.lease_name(), "cloud-controller-manager");
        assert!(o.election.leader_elect);
        let p = o.provider_options();
        assert_eq!(
            p.config_path.as_deref(),
            Some(std::path::Path::new("/etc/aws.conf"))
        );
        assert!(p.allow_untagged_cloud);
        assert_eq!(
            enabled_controllers(&o.controllers).unwrap(),
            vec!["cloud-node", "cloud-node-lifecycle", "service"]
        );
        let o = parse(&["--cloud-provider=aws", "--allow-untagged-cloud=false"]).unwrap();
        assert!(!o.allow_untagged_cloud);
    }

    #[test]
    fn controllers_flag_semantics() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            enabled_controllers(&s(&["cloud-node"])).unwrap(),
            vec!["cloud-node"]
        );
        assert_eq!(
            enabled_controllers(&s(&["*", "-cloud-node", "-service", "-route"])).unwrap(),
            vec!["cloud-node-lifecycle"]
        );
        assert!(enabled_controllers(&s(&["nope"]))
            .unwrap_err()
            .contains("unknown controller"));
        // Deckhouse's DVP list when load balancers are on, and upstream's canonical names.
        assert_eq!(
            enabled_controllers(&s(&[
                "cloud-node",
                "cloud-node-lifecycle",
                "service-lb-controller"
            ]))
            .unwrap(),
            vec!["cloud-node", "cloud-node-lifecycle", "service"]
        );
        assert_eq!(
            enabled_controllers(&s(&[
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "node-route-controller",
                "nodeipam",
            ]))
            .unwrap(),
            vec!["cloud-node", "cloud-node-lifecycle", "route"]
        );
        assert_eq!(
            enabled_controllers(&s(&[
                "*",
                "-service-lb-controller",
                "-node-route-controller"
            ]))
            .unwrap(),
            vec!["cloud-node", "cloud-node-lifecycle"]
        );
    }

    #[test]
    fn refuses_unimplemented_upstream_flags_by_name() {
        let args: Vec<String> = [
            "--cloud-provider=aws",
            "--leader-elect-resource-lock=leases",
            "--client-ca-file",
            "/ca.crt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let e = refuse_unimplemented(&args).unwrap_err();
        assert!(
            e.contains("--leader-elect-resource-lock, --client-ca-file"),
            "{e}"
        );
        assert!(refuse_unimplemented(&["--secure-port=0".to_string()]).is_ok());
        assert!(refuse_unimplemented(&["--v=3".to_string()]).is_ok());
    }

    #[test]
    fn pod_network_flags() {
        let o = parse(&["--cloud-provider=aws"]).unwrap();
        assert!(o.configure_cloud_routes);
        assert!(!o.allocate_node_cidrs);
        assert_eq!(o.route_reconciliation_period, Duration::from_secs(10));
        assert_eq!(o.cidr_allocator_type, "RangeAllocator");
        assert_eq!(o.pod_network().unwrap(), PodNetwork::default());
        let o = parse(&[
            "--cloud-provider=aws",
            "--configure-cloud-routes=false",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
            "--node-cidr-mask-size-ipv6=60",
            "--route-reconciliation-period=1m30s",
            "--cidr-allocator-type=RangeAllocator",
        ])
        .unwrap();
        assert!(!o.configure_cloud_routes);
        assert_eq!(o.route_reconciliation_period, Duration::from_secs(90));
        let n = o.pod_network().unwrap();
        assert_eq!(n.cluster_cidrs.len(), 2);
        let masks: Vec<u8> = n.allocate.unwrap().iter().map(|(_, m)| *m).collect();
        assert_eq!(masks, vec![24, 60]);
        for bad in [
            "--cluster-cidr=10.244.0.0",
            "--cidr-allocator-type=CloudAllocator",
            "--node-cidr-mask-size-ipv4=33",
            "--route-reconciliation-period=10",
        ] {
            let e = parse(&["--cloud-provider=aws", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            let flag = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(flag), "{bad}: {e}");
        }
        assert!(refuse_unimplemented(&["--cluster-cidr=10.0.0.0/8".to_string()]).is_ok());
    }

    #[test]
    fn groups_are_flattened_with_the_ccm_defaults() {
        let o = parse(&["--cloud-provider=aws"]).unwrap();
        let c = o.serving.serving(SECURE_PORT).unwrap();
        assert_eq!(c.address, "0.0.0.0:10258".parse().unwrap());
        let o = parse(&[
            "--cloud-provider=aws",
            "--secure-port=0",
            "--kubeconfig=/k",
            "--master=https://m",
            "--leader-elect-resource-name=x",
            "--logging-format=json",
        ])
        .unwrap();
        assert!(o.serving.serving(SECURE_PORT).is_none());
        assert_eq!(
            o.client.kubeconfig.as_deref(),
            Some(std::path::Path::new("/k"))
        );
        assert_eq!(o.client.master.as_deref(), Some("https://m"));
        assert_eq!(o.lease_name(), "x");
        assert_eq!(o.logging.logging_format, "json");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--cloud-provider=aws", "--node-monitor-period=5"]).is_err());
        assert!(parse(&["--cloud-provider=aws", "--concurrent-node-syncs=0"]).is_err());
        assert!(parse(&["--cloud-provider=aws", "--no-such-flag"]).is_err());
    }
}
