//! Command-line flags, compatible with the upstream cloud-controller-manager's names.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};
use stratus_runtime::duration::parse_go_duration;
use stratus_serving::{AlwaysAllow, DecisionTtls, ServingConfig, TlsSource};

use crate::pod_network::{
    parse_allocator_type, parse_cluster_cidrs, pod_network, ClusterCidrs, MaskFlags, PodNetwork,
};

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
    "tagging-controller-rate-limit",
    "resources",
    "tags",
    // Secure serving: client certificates and front-proxy headers are not trusted, TLS settings
    // are rustls's defaults, HTTP/2 is not served.
    "client-ca-file",
    "requestheader-client-ca-file",
    "requestheader-allowed-names",
    "requestheader-username-headers",
    "requestheader-uid-headers",
    "requestheader-group-headers",
    "requestheader-extra-headers-prefix",
    "authentication-tolerate-lookup-failure",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-sni-cert-key",
    "http2-max-streams-per-connection",
    "permit-port-sharing",
    "permit-address-sharing",
];

/// Flags of `cloud-controller-manager`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cloud-controller-manager",
    version,
    about = "Stratus cloud-controller-manager",
    // As pflag: a flag given twice takes the last value.
    args_override_self = true
)]
pub struct Options {
    /// The cloud provider (only `aws` in this build).
    #[arg(long = "cloud-provider")]
    pub cloud_provider: String,
    /// Path to the cloud provider configuration file (INI).
    #[arg(long = "cloud-config")]
    pub cloud_config: Option<PathBuf>,
    /// Path to a kubeconfig; in-cluster config or $KUBECONFIG when unset.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Address of the Kubernetes API server (overrides the kubeconfig's server).
    #[arg(long)]
    pub master: Option<String>,
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
    /// Log verbosity (klog-style).
    #[arg(long = "v", short = 'v', default_value_t = 0)]
    pub verbosity: u8,
    /// Run the controllers only while holding the leader lease (several replicas, one active).
    #[arg(long = "leader-elect", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long a silent leader keeps the lease.
    #[arg(long = "leader-elect-lease-duration", default_value = "15s", value_parser = parse_go_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    #[arg(long = "leader-elect-renew-deadline", default_value = "10s", value_parser = parse_go_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to take the lease and the leader renews it.
    #[arg(long = "leader-elect-retry-period", default_value = "2s", value_parser = parse_go_duration)]
    pub leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(
        long = "leader-elect-resource-name",
        default_value = "cloud-controller-manager"
    )]
    pub leader_elect_resource_name: String,
    /// Namespace of the Lease.
    #[arg(
        long = "leader-elect-resource-namespace",
        default_value = "kube-system"
    )]
    pub leader_elect_resource_namespace: String,
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
    /// Log format: `text` or `json` (one JSON object per line).
    #[arg(long = "logging-format", default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
    /// Services whose load balancers are synced concurrently.
    #[arg(long = "concurrent-service-syncs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_service_syncs: u16,
    /// Stratus: how often load balancers of deleted Services are looked for and removed.
    #[arg(long = "load-balancer-reaper-period", default_value = "10m0s", value_parser = parse_go_duration)]
    pub load_balancer_reaper_period: Duration,
    /// Stratus: how long a changed node set must hold still before targets are updated.
    #[arg(long = "node-churn-quiet-period", default_value = "1s", value_parser = parse_go_duration)]
    pub node_churn_quiet_period: Duration,
    /// Stratus: how often the shared EC2 instance view is listed again.
    #[arg(long = "instance-cache-refresh-period", default_value = "1m0s", value_parser = parse_go_duration)]
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
    /// The port HTTPS (/healthz, /livez, /readyz, /metrics) is served on; 0 turns serving off.
    #[arg(long = "secure-port", default_value_t = 10258)]
    pub secure_port: u16,
    /// The address HTTPS is served on (0.0.0.0 or :: for every interface).
    #[arg(long = "bind-address", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// PEM serving certificate (then the intermediates); a self-signed one when unset.
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Where the self-signed certificate is kept (cloud-controller-manager.crt/.key); in memory when unset.
    #[arg(long = "cert-dir")]
    pub cert_dir: Option<PathBuf>,
    /// Kubeconfig of the API server that reviews bearer tokens; the CCM's own when unset.
    #[arg(long = "authentication-kubeconfig")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the API server that authorizes requests; the CCM's own when unset.
    #[arg(long = "authorization-kubeconfig")]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// Accepted and ignored: the client-certificate settings it skips looking up are never used.
    #[arg(long = "authentication-skip-lookup", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub authentication_skip_lookup: bool,
    /// How long token reviews are cached.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// How long 'authorized' answers are cached.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long 'unauthorized' answers are cached.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Paths served without authentication or authorization (a trailing * matches a prefix).
    #[arg(long = "authorization-always-allow-paths", default_value = stratus_serving::DEFAULT_ALWAYS_ALLOW_PATHS, value_parser = parse_always_allow_paths)]
    pub authorization_always_allow_paths: AlwaysAllow,
}

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
}

impl Options {
    /// What `--secure-port` and its companion flags ask for; `None` when the port is 0.
    pub fn serving(&self) -> Option<ServingConfig> {
        if self.secure_port == 0 {
            return None;
        }
        let tls = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            // clap requires both or neither.
            _ => TlsSource::SelfSigned {
                cert_dir: self.cert_dir.clone(),
                hosts: stratus_serving::self_signed::default_hosts(self.bind_address),
            },
        };
        Some(ServingConfig {
            address: SocketAddr::new(self.bind_address, self.secure_port),
            tls,
            always_allow: self.authorization_always_allow_paths.clone(),
            token_ttl: self.authentication_token_webhook_cache_ttl,
            decision_ttls: DecisionTtls {
                allowed: self.authorization_webhook_cache_authorized_ttl,
                denied: self.authorization_webhook_cache_unauthorized_ttl,
            },
        })
    }
}

/// `--authorization-always-allow-paths`: comma-separated paths.
fn parse_always_allow_paths(value: &str) -> Result<AlwaysAllow, String> {
    AlwaysAllow::parse(&value.split(',').collect::<Vec<_>>())
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

/// The controllers Stratus knows, with whether `*` enables them.
pub const KNOWN_CONTROLLERS: &[(&str, bool)] = &[
    ("cloud-node", true),
    ("cloud-node-lifecycle", true),
    ("service", true),
    ("route", true),
];

/// Resolves `--controllers` into the enabled set (upstream semantics).
pub fn enabled_controllers(spec: &[String]) -> Result<Vec<&'static str>, String> {
    let mut star = false;
    let mut on: Vec<&str> = Vec::new();
    let mut off: Vec<&str> = Vec::new();
    for item in spec.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item == "*" {
            star = true;
            continue;
        }
        let (name, disable) = match item.strip_prefix('-') {
            Some(n) => (n, true),
            None => (item, false),
        };
        let known = KNOWN_CONTROLLERS
            .iter()
            .find(|(k, _)| *k == name)
            .ok_or_else(|| {
                let names: Vec<&str> = KNOWN_CONTROLLERS.iter().map(|(k, _)| *k).collect();
                format!(
                    "--controllers: unknown controller {name:?} (known: {})",
                    names.join(", ")
                )
            })?;
        if disable {
            off.push(known.0)
        } else {
            on.push(known.0)
        }
    }
    Ok(KNOWN_CONTROLLERS
        .iter()
        .filter(|(name, default_on)| {
            !off.contains(name) && (on.contains(name) || (star && *default_on))
        })
        .map(|(name, _)| *name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(o.verbosity, 2);
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
    fn serving_flags() {
        let o = parse(&["--cloud-provider=aws"]).unwrap();
        let c = o.serving().expect("served by default");
        assert_eq!(c.address, "0.0.0.0:10258".parse().unwrap());
        assert!(matches!(
            &c.tls,
            TlsSource::SelfSigned { cert_dir: None, hosts } if hosts.contains(&"localhost".to_string())
        ));
        assert!(c.always_allow.matches("/healthz"));
        assert!(c.always_allow.matches("/readyz"));
        assert!(c.always_allow.matches("/livez"));
        assert!(!c.always_allow.matches("/metrics"));
        assert_eq!(c.token_ttl, Duration::from_secs(10));
        assert_eq!(
            c.decision_ttls,
            DecisionTtls {
                allowed: Duration::from_secs(10),
                denied: Duration::from_secs(10)
            }
        );
        assert!(!o.authentication_skip_lookup);

        assert!(parse(&["--cloud-provider=aws", "--secure-port=0"])
            .unwrap()
            .serving()
            .is_none());

        let o = parse(&[
            "--cloud-provider=aws",
            "--secure-port=8443",
            "--bind-address=::1",
            "--tls-cert-file=/tls/tls.crt",
            "--tls-private-key-file=/tls/tls.key",
            "--authorization-always-allow-paths=/healthz,/metrics",
            "--authentication-skip-lookup",
            "--authentication-token-webhook-cache-ttl=0s",
            "--authorization-webhook-cache-authorized-ttl=1m",
            "--authorization-webhook-cache-unauthorized-ttl=5s",
        ])
        .unwrap();
        let c = o.serving().unwrap();
        assert_eq!(c.address, "[::1]:8443".parse().unwrap());
        assert_eq!(
            c.tls,
            TlsSource::Files {
                cert: "/tls/tls.crt".into(),
                key: "/tls/tls.key".into()
            }
        );
        assert!(c.always_allow.matches("/metrics"));
        assert!(!c.always_allow.matches("/readyz"));
        assert_eq!(c.token_ttl, Duration::ZERO);
        assert_eq!(c.decision_ttls.allowed, Duration::from_secs(60));
        assert!(o.authentication_skip_lookup);

        let o = parse(&["--cloud-provider=aws", "--cert-dir=/var/run/ccm"]).unwrap();
        assert!(matches!(
            o.serving().unwrap().tls,
            TlsSource::SelfSigned { cert_dir: Some(d), .. } if d == std::path::Path::new("/var/run/ccm")
        ));
        let o = parse(&[
            "--cloud-provider=aws",
            "--authorization-always-allow-paths=",
        ])
        .unwrap();
        assert!(!o.serving().unwrap().always_allow.matches("/healthz"));

        for (bad, flag) in [
            ("--tls-cert-file=/tls/tls.crt", "--tls-private-key-file"),
            ("--tls-private-key-file=/tls/tls.key", "--tls-cert-file"),
            (
                "--authorization-always-allow-paths=/he*z",
                "--authorization-always-allow-paths",
            ),
            ("--secure-port=70000", "--secure-port"),
            ("--bind-address=localhost", "--bind-address"),
        ] {
            let e = parse(&["--cloud-provider=aws", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--cloud-provider=aws", "--node-monitor-period=5"]).is_err());
        assert!(parse(&["--cloud-provider=aws", "--concurrent-node-syncs=0"]).is_err());
        assert!(parse(&["--cloud-provider=aws", "--no-such-flag"]).is_err());
    }
}
