//! Command-line flags, compatible with the upstream cloud-controller-manager's names.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};
use stratus_cloud::ProviderOptions;
use stratus_election::LeaderElectionArgs;
use stratus_kube_kit::{KubeApiArgs, KubeClientArgs};
use stratus_runtime::feature_gates::{parse_controller_manager_gates, FeatureGates};

use crate::webhooks::WebhookArgs;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;
use stratus_serving::ServingArgs;

use crate::pod_network::{
    parse_allocator_type, parse_cluster_cidrs, pod_network, ClusterCidrs, MaskFlags, PodNetwork,
};
use crate::tagging_flags::{NodeIpamArgs, TaggingArgs};

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
    /// The Kubernetes client's request budget and format.
    #[command(flatten)]
    pub api: KubeApiArgs,
    /// Feature gates, `Name=true|false,…` (the gates of a Kubernetes v1.34 controller manager).
    #[arg(long = "feature-gates", default_value = "", value_parser = parse_controller_manager_gates)]
    pub feature_gates: FeatureGates,
    /// Initialised nodes whose addresses are refreshed at once (workers besides
    /// --concurrent-node-syncs).
    #[arg(long = "concurrent-node-status-updates", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_node_status_updates: u16,
    /// Every Node and Service is synced again after a random time in [this, 2×this).
    #[arg(long = "min-resync-period", default_value = "12h0m0s", value_parser = parse_go_duration)]
    pub min_resync_period: Duration,
    /// Pause between starting one controller and the next.
    #[arg(long = "controller-start-interval", default_value = "0s", value_parser = parse_go_duration)]
    pub controller_start_interval: Duration,
    /// Deprecated upstream and a no-op there: node health is --node-monitor-period, routes
    /// --route-reconciliation-period.
    #[arg(long = "node-sync-period", default_value = "0s", value_parser = parse_go_duration)]
    pub node_sync_period: Duration,
    /// Read by kube-controller-manager (in-tree volume plugins with an external cloud provider);
    /// a cloud-controller-manager has no volume controller to give it to.
    #[arg(long = "external-cloud-volume-plugin", default_value = "")]
    pub external_cloud_volume_plugin: String,
    /// Cloud-provider admission webhooks: the provider's webhooks to serve.
    #[command(flatten)]
    pub webhooks: WebhookArgs,
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

    /// The secure port's settings (`None`: not served), the feature gates applied:
    /// `RemoteRequestHeaderUID=false` stops trusting the front proxy's UID headers,
    /// `AllowParsingUserUIDFromCertAuth=false` stops reading a client certificate's UID.
    pub fn serving_config(&self) -> Option<stratus_serving::ServingConfig> {
        let mut config = self.serving.serving(SECURE_PORT)?;
        if !self.feature_gates.enabled("RemoteRequestHeaderUID") {
            config.client_auth.header_names.uid.clear();
        }
        config.client_auth.uid_from_certificates = self
            .feature_gates
            .enabled("AllowParsingUserUIDFromCertAuth");
        Some(config)
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

/// Flags whose use depends on a feature gate, as upstream checks them: the logging alpha options
/// need `LoggingAlphaOptions`. Deprecated no-op flags are named in a warning.
pub fn check_gated_flags(opts: &Options) -> Result<(), String> {
    let alpha = opts.logging.alpha_options_in_use();
    if !alpha.is_empty() && !opts.feature_gates.enabled("LoggingAlphaOptions") {
        return Err(format!(
            "{} {} alpha: pass --feature-gates=LoggingAlphaOptions=true",
            alpha.join(", "),
            if alpha.len() == 1 { "is" } else { "are" }
        ));
    }
    if !opts.node_sync_period.is_zero() {
        tracing::warn!("--node-sync-period is deprecated and does nothing (as upstream): node health follows --node-monitor-period, routes --route-reconciliation-period");
    }
    if !opts.external_cloud_volume_plugin.is_empty() {
        tracing::info!("--external-cloud-volume-plugin is read by kube-controller-manager; a cloud-controller-manager runs no volume controller");
    }
    Ok(())
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
    fn every_generic_upstream_flag_parses() {
        // Contract §4.1: every flag of k8s.io/cloud-provider's options, the generic controller
        // manager, secure serving, delegated authn/authz and component-base logging, each with a
        // value of the kind upstream takes.
        let flags = [
            "--cloud-config=/etc/aws.conf",
            "--allow-untagged-cloud=true",
            "--route-reconciliation-period=10s",
            "--node-monitor-period=5s",
            "--cluster-name=kubernetes",
            "--cluster-cidr=10.0.0.0/16",
            "--allocate-node-cidrs=true",
            "--cidr-allocator-type=RangeAllocator",
            "--configure-cloud-routes=false",
            "--use-service-account-credentials=false",
            "--external-cloud-volume-plugin=aws",
            "--node-sync-period=10s",
            "--controllers=*,-route,cloud-node-controller",
            "--leader-elect=true",
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=2s",
            "--leader-elect-resource-lock=leases",
            "--leader-elect-resource-name=cloud-controller-manager",
            "--leader-elect-resource-namespace=kube-system",
            "--enable-leader-migration=false",
            "--kube-api-qps=20",
            "--kube-api-burst=30",
            "--kube-api-content-type=application/vnd.kubernetes.protobuf",
            "--min-resync-period=12h",
            "--controller-start-interval=0s",
            "--profiling=true",
            "--contention-profiling=false",
            "--concurrent-node-syncs=1",
            "--concurrent-node-status-updates=1",
            "--node-status-update-frequency=5m",
            "--concurrent-service-syncs=1",
            "--webhooks=*",
            "--webhook-secure-port=10260",
            "--webhook-bind-address=127.0.0.1",
            "--webhook-cert-dir=/tmp/webhook",
            "--webhook-tls-cert-file=/w/tls.crt",
            "--webhook-tls-private-key-file=/w/tls.key",
            "--bind-address=127.0.0.1",
            "--secure-port=10258",
            "--cert-dir=/var/run/ccm",
            "--tls-cert-file=/tls/tls.crt",
            "--tls-private-key-file=/tls/tls.key",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-min-version=VersionTLS12",
            "--tls-sni-cert-key=/tls/a.crt,/tls/a.key:a.example.com",
            "--http2-max-streams-per-connection=100",
            "--permit-port-sharing=false",
            "--permit-address-sharing=false",
            "--authentication-kubeconfig=/etc/kubeconfig",
            "--authentication-skip-lookup=false",
            "--authentication-token-webhook-cache-ttl=10s",
            "--authentication-tolerate-lookup-failure=false",
            "--client-ca-file=/pki/ca.crt",
            "--requestheader-client-ca-file=/pki/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-kubeconfig=/etc/kubeconfig",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez",
            "--authorization-webhook-cache-authorized-ttl=10s",
            "--authorization-webhook-cache-unauthorized-ttl=10s",
            "--kubeconfig=/etc/kubeconfig",
            "--master=https://127.0.0.1:6443",
            "--v=2",
            "--vmodule=service*=4",
            "--logging-format=text",
            "--log-flush-frequency=5s",
            "--feature-gates=LoggingAlphaOptions=true,CloudControllerManagerWebhook=false",
            "--log-text-split-stream=true",
            "--log-text-info-buffer-size=64Ki",
            "--log-json-split-stream=false",
            "--log-json-info-buffer-size=0",
            "--node-cidr-mask-size=24",
        ];
        let mut args = vec!["--cloud-provider=aws"];
        args.extend(flags);
        let o = parse(&args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.api.rate_limit().unwrap().qps, 20.0);
        assert_eq!(o.min_resync_period, Duration::from_secs(12 * 3600));
        assert!(o.feature_gates.enabled("LoggingAlphaOptions"));
        check_gated_flags(&o).unwrap();
        let c = o.serving_config().unwrap();
        assert_eq!(c.client_auth.header_names.uid, vec!["X-Remote-Uid"]);
        assert_eq!(c.listen.http2_max_streams, 100);
        assert_eq!(c.tls_policy.sni_certs.len(), 1);
        assert!(c.profiling);
    }

    #[test]
    fn gates_change_what_flags_mean() {
        let o = parse(&["--cloud-provider=aws", "--log-text-split-stream"]).unwrap();
        let e = check_gated_flags(&o).unwrap_err();
        assert!(
            e.contains("--log-text-split-stream") && e.contains("LoggingAlphaOptions"),
            "{e}"
        );
        let o = parse(&[
            "--cloud-provider=aws",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--feature-gates=RemoteRequestHeaderUID=false",
        ])
        .unwrap();
        assert!(o
            .serving_config()
            .unwrap()
            .client_auth
            .header_names
            .uid
            .is_empty());
        assert!(
            o.serving_config()
                .unwrap()
                .client_auth
                .uid_from_certificates
        );
        let o = parse(&[
            "--cloud-provider=aws",
            "--feature-gates=AllowParsingUserUIDFromCertAuth=false",
        ])
        .unwrap();
        assert!(
            !o.serving_config()
                .unwrap()
                .client_auth
                .uid_from_certificates
        );
        for (bad, flag) in [
            ("--feature-gates=NoSuchGate=true", "--feature-gates"),
            (
                "--leader-elect-resource-lock=endpoints",
                "--leader-elect-resource-lock",
            ),
            ("--contention-profiling=true", "--contention-profiling"),
            (
                "--kube-api-content-type=text/yaml",
                "--kube-api-content-type",
            ),
            (
                "--requestheader-allowed-names= ",
                "--requestheader-allowed-names",
            ),
        ] {
            let e = parse(&["--cloud-provider=aws", bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag), "{bad}: {e}");
        }
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
