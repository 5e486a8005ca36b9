//! The upstream `--leader-elect*` flags as a clap group any binary can flatten, and the election
//! settings they make.

use std::sync::OnceLock;
use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_runtime::duration::parse_go_duration;

use crate::ElectionConfig;

/// Leader election flags, with client-go's defaults.
#[derive(Debug, Clone, Args)]
pub struct LeaderElectionArgs {
    /// Run the controllers only while holding the leader lease (several replicas, one active).
    #[arg(long = "leader-elect", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long a silent leader keeps the lease.
    #[arg(long = "leader-elect-lease-duration", default_value = "15s", value_parser = parse_go_duration)]
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    #[arg(long = "leader-elect-renew-deadline", default_value = "10s", value_parser = parse_go_duration)]
    pub renew_deadline: Duration,
    /// How often candidates try to take the lease and the leader renews it.
    #[arg(long = "leader-elect-retry-period", default_value = "2s", value_parser = parse_go_duration)]
    pub retry_period: Duration,
    /// The lock object: `leases` (the only lock Kubernetes still supports; `endpoints`,
    /// `configmaps` and the migration locks `endpointsleases`, `configmapsleases` were removed
    /// upstream and are refused with that reason).
    #[arg(long = "leader-elect-resource-lock", default_value = "leases", value_parser = parse_resource_lock)]
    pub resource_lock: String,
    /// Name of the Lease.
    #[arg(long = "leader-elect-resource-name")]
    pub resource_name: Option<String>,
    /// Namespace of the Lease [default: kube-system; a controller-runtime manager such as
    /// capdvp: the pod's namespace].
    #[arg(long = "leader-elect-resource-namespace")]
    pub resource_namespace: Option<String>,
}

/// The Lease namespace of Kubernetes components when `--leader-elect-resource-namespace` is unset.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// Where a pod's service-account token volume says which namespace the pod runs in.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The namespace this process's pod runs in, as controller-runtime finds it for its Lease:
/// `POD_NAMESPACE`, else the service-account namespace file; `None` outside a pod.
pub fn pod_namespace() -> Option<String> {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string(POD_NAMESPACE_FILE).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}

/// This process's candidate identity, the same for every lease it competes for.
static IDENTITY: OnceLock<String> = OnceLock::new();

/// The host name plus a random suffix, as client-go makes identities.
pub fn identity(fallback_host: &str) -> String {
    IDENTITY
        .get_or_init(|| {
            let host = std::env::var("HOSTNAME")
                .ok()
                .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| fallback_host.to_string());
            format!("{host}_{:016x}", rand::random::<u64>())
        })
        .clone()
}

impl LeaderElectionArgs {
    /// The main Lease's name: `--leader-elect-resource-name`, or `default` (the binary's name).
    pub fn lease_name(&self, default: &str) -> String {
        self.resource_name
            .clone()
            .unwrap_or_else(|| default.to_string())
    }

    /// Settings of the election on `lease` (this process's identity; `component` names it when
    /// the host has no name), in `kube-system` unless the flag names another namespace.
    pub fn config(&self, lease: &str, component: &str) -> ElectionConfig {
        self.config_in(lease, component, DEFAULT_NAMESPACE)
    }

    /// As [`LeaderElectionArgs::config`], in `default_namespace` unless the flag names another.
    pub fn config_in(
        &self,
        lease: &str,
        component: &str,
        default_namespace: &str,
    ) -> ElectionConfig {
        ElectionConfig {
            lease_name: lease.to_string(),
            namespace: self
                .resource_namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_string()),
            identity: identity(component),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }
}

/// `--leader-elect-resource-lock`: only `leases`.
fn parse_resource_lock(value: &str) -> Result<String, String> {
    match value {
        "leases" => Ok(value.to_string()),
        "endpoints" | "configmaps" | "endpointsleases" | "configmapsleases" => Err(format!(
            "{value} locks were removed from Kubernetes (v1.24 and v1.28); use leases"
        )),
        _ => Err("not a lock type (leases)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        election: LeaderElectionArgs,
    }

    #[test]
    fn defaults_and_overrides_as_client_go() {
        let f = Flags::parse_from(["x"]);
        assert!(f.election.leader_elect);
        assert_eq!(f.election.lease_name("ccm"), "ccm");
        let c = f.election.config("ccm", "ccm");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.namespace, "kube-system");
        assert_eq!(f.election.config_in("m", "m", "d8-ns").namespace, "d8-ns");
        assert!(c.validate().is_ok());
        let f = Flags::parse_from([
            "x",
            "--leader-elect=false",
            "--leader-elect-resource-name=other",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-namespace=elsewhere",
        ]);
        assert_eq!(
            f.election.config_in("m", "m", "d8-ns").namespace,
            "elsewhere"
        );
        assert!(!f.election.leader_elect);
        assert_eq!(f.election.lease_name("ccm"), "other");
        assert_eq!(f.election.retry_period, Duration::from_millis(500));
        assert_eq!(
            f.election.config("a", "x").identity,
            f.election.config("b", "x").identity,
            "one identity for every lease"
        );
    }
}
