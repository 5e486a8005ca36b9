//! The command line, compatible with the upstream controller's flags: the ones implemented are
//! accepted with upstream's names and defaults; known upstream flags this build does not
//! implement are refused by name with a clear message (never silently ignored).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};
use stratus_kube_kit::KubeClientArgs;
use stratus_runtime::duration::parse_go_duration;

/// Upstream flags (and the reason) this build refuses.
pub const UNSUPPORTED_FLAGS: &[(&str, &str)] = &[
    ("--enable-shield", "AWS Shield is not implemented"),
    ("--enable-waf", "AWS WAF is not implemented"),
    ("--enable-wafv2", "AWS WAFv2 is not implemented"),
    (
        "--disable-ingress-class-annotation",
        "the kubernetes.io/ingress.class annotation cannot be turned off in this build",
    ),
    (
        "--disable-ingress-group-name-annotation",
        "the group.name annotation cannot be turned off in this build",
    ),
    (
        "--enable-service-mutator-webhook",
        "the Service mutator webhook is not in this build (it would take LoadBalancer Services from the cloud-controller-manager)",
    ),
];

/// The `--feature-gates` this build implements, with upstream's defaults; any other gate name
/// is refused (never silently ignored).
pub const FEATURE_GATES: &[(&str, bool)] = &[
    // NLBs get a managed frontend security group (and the shared backend one).
    ("NLBSecurityGroup", true),
    // The Service → NLB driver runs.
    ("EnableServiceController", true),
];

/// Why the command line is refused.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// clap's own output (usage error, help, version).
    #[error("{0}")]
    Parse(String),
    /// Known upstream flags this build does not implement.
    #[error("unsupported flags: {}", .0.join("; "))]
    Unsupported(Vec<String>),
    /// A value clap accepted but the controller cannot use.
    #[error("{0}")]
    Invalid(String),
}

/// The flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "aws-load-balancer-controller",
    version = stratus_runtime::build_info::version(),
    about = "Registers Kubernetes endpoints into AWS ELBv2 target groups (TargetGroupBinding)"
)]
pub struct Options {
    /// The cluster's name: tags `elbv2.k8s.aws/cluster=<name>` on what the controller makes
    /// (required).
    #[arg(long = "cluster-name", default_value = "")]
    pub cluster_name: String,
    /// The IngressClass name handled (kept for the Ingress controller).
    #[arg(long = "ingress-class", default_value = "alb")]
    pub ingress_class: String,
    /// The AWS region (else `AWS_REGION` and the SDK's chain).
    #[arg(long = "aws-region")]
    pub aws_region: Option<String>,
    /// The cluster's VPC.
    #[arg(long = "aws-vpc-id")]
    pub aws_vpc_id: Option<String>,
    /// Custom endpoints, `service=url,...` (`elasticloadbalancing` is used).
    #[arg(long = "aws-api-endpoints", value_parser = parse_map, default_value = "")]
    pub aws_api_endpoints: BTreeMap<String, String>,
    /// Attempts of one AWS call (the shared call guard retries).
    #[arg(long = "aws-max-retries", default_value_t = 10)]
    pub aws_max_retries: u32,
    /// Tags on every AWS resource made, `k=v,...`.
    #[arg(long = "default-tags", value_parser = parse_map, default_value = "")]
    pub default_tags: BTreeMap<String, String>,
    /// Attach the shared backend security group to ALBs with a managed frontend group and let
    /// it reach their targets (rules on the targets' security groups).
    #[arg(long = "enable-backend-security-group", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub enable_backend_security_group: bool,
    /// The shared backend security group to use (empty: one made and tagged by the controller).
    #[arg(long = "backend-security-group", default_value = "")]
    pub backend_security_group: String,
    /// Default target type of Ingress/Service backends (`instance` or `ip`).
    #[arg(long = "default-target-type", default_value = "instance")]
    pub default_target_type: String,
    /// Run only while holding the leader Lease.
    #[arg(long = "enable-leader-election", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub enable_leader_election: bool,
    /// Name of the leader Lease.
    #[arg(
        long = "leader-election-id",
        default_value = "aws-load-balancer-controller-leader"
    )]
    pub leader_election_id: String,
    /// Namespace of the leader Lease.
    #[arg(
        long = "leader-election-namespace",
        env = "POD_NAMESPACE",
        default_value = "kube-system"
    )]
    pub leader_election_namespace: String,
    /// HTTPS `/metrics` (bearer token, TokenReview + SubjectAccessReview on the path) and open
    /// `/healthz`, `/readyz`; `0` turns it off.
    #[arg(long = "metrics-bind-addr", default_value = ":8080")]
    pub metrics_bind_addr: String,
    /// Accepted for compatibility: the probes are served on `--metrics-bind-addr`.
    #[arg(long = "health-probe-bind-addr", default_value = ":61779")]
    pub health_probe_bind_addr: String,
    /// Ingress groups reconciled at once.
    #[arg(long = "ingress-max-concurrent-reconciles", default_value_t = 3)]
    pub ingress_concurrency: u16,
    /// NLB Services reconciled at once.
    #[arg(long = "service-max-concurrent-reconciles", default_value_t = 3)]
    pub service_concurrency: u16,
    /// The `spec.loadBalancerClass` of the Services served as NLBs.
    #[arg(long = "load-balancer-class", default_value = "service.k8s.aws/nlb")]
    pub load_balancer_class: String,
    /// `Gate=true|false,...`: see [`FEATURE_GATES`].
    #[arg(long = "feature-gates", value_parser = parse_map, default_value = "")]
    pub feature_gates: BTreeMap<String, String>,
    /// Only this namespace's TargetGroupBindings (all when empty).
    #[arg(long = "watch-namespace", default_value = "")]
    pub watch_namespace: String,
    /// Every binding is checked against AWS again this often.
    #[arg(long = "sync-period", default_value = "10h", value_parser = parse_go_duration)]
    pub sync_period: Duration,
    /// Bindings reconciled at once.
    #[arg(
        long = "targetgroupbinding-max-concurrent-reconciles",
        default_value_t = 3
    )]
    pub tgb_concurrency: u16,
    /// Longest retry delay of a failing binding.
    #[arg(long = "targetgroupbinding-max-exponential-backoff-delay", default_value = "1000s", value_parser = parse_go_duration)]
    pub tgb_max_backoff: Duration,
    /// Target changes are applied once the endpoints were quiet this long (Stratus).
    #[arg(long = "targetgroupbinding-coalesce-period", default_value = "500ms", value_parser = parse_go_duration)]
    pub tgb_coalesce: Duration,
    /// ...or once the oldest unapplied change is this old, even under continuous churn (Stratus).
    #[arg(long = "targetgroupbinding-coalesce-max-delay", default_value = "2s", value_parser = parse_go_duration)]
    pub tgb_coalesce_max_delay: Duration,
    /// Pod readiness gates: the webhook adds `target-health.elbv2.k8s.aws/<binding>` gates to new
    /// pods of labelled namespaces, the controller sets those conditions.
    #[arg(long = "enable-pod-readiness-gate-inject", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub pod_readiness_gate: bool,
    /// HTTPS port of the admission webhooks (pod readiness gates, TargetGroupBinding
    /// validation), on every replica; `0` turns them off (Stratus).
    #[arg(long = "webhook-bind-port", default_value_t = crate::webhook::DEFAULT_PORT)]
    pub webhook_bind_port: u16,
    /// Directory of the webhook serving certificate `tls.crt` and its key `tls.key` (PEM).
    #[arg(long = "webhook-cert-dir", default_value = crate::webhook::DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
    /// `info` or `debug`.
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
    /// The Kubernetes client.
    #[command(flatten)]
    pub kube: KubeClientArgs,
}

fn parse_map(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not key=value"))?;
        if k.trim().is_empty() {
            return Err(format!("{pair:?} has an empty key"));
        }
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// `:8080` → `0.0.0.0:8080`; `0` → off.
pub fn bind_address(flag: &str, value: &str) -> Result<Option<SocketAddr>, OptionsError> {
    if value == "0" || value.is_empty() {
        return Ok(None);
    }
    let full = if value.starts_with(':') {
        format!("0.0.0.0{value}")
    } else {
        value.to_string()
    };
    full.parse()
        .map(Some)
        .map_err(|_| OptionsError::Invalid(format!("{flag}={value}: not host:port")))
}

impl Options {
    /// Whether the feature gate `name` (one of [`FEATURE_GATES`]) is on.
    pub fn gate(&self, name: &str) -> bool {
        let default = FEATURE_GATES
            .iter()
            .find(|(g, _)| *g == name)
            .is_some_and(|(_, on)| *on);
        self.feature_gates
            .get(name)
            .map_or(default, |v| v == "true")
    }

    /// Where the webhooks listen (all interfaces, as upstream); `None` when turned off.
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        (self.webhook_bind_port != 0)
            .then(|| SocketAddr::from(([0, 0, 0, 0], self.webhook_bind_port)))
    }

    /// Parses and checks the arguments: refused upstream flags first (all named at once), then
    /// clap, then every value ([`Options::problems`], all named at once).
    pub fn parse_args<I, T>(args: I) -> Result<Options, OptionsError>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let opts = Options::parse_unchecked(args)?;
        let problems = opts.problems();
        if problems.is_empty() {
            Ok(opts)
        } else {
            Err(OptionsError::Invalid(problems.join("\n")))
        }
    }

    /// Parses the arguments: refused upstream flags first (all named at once), then clap; the
    /// values are checked by [`Options::problems`] (the process does it at start, with its other
    /// checks).
    pub fn parse_unchecked<I, T>(args: I) -> Result<Options, OptionsError>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let refused: Vec<String> = args
            .iter()
            .skip(1)
            .filter_map(|a| {
                let name = a.split('=').next().unwrap_or(a);
                UNSUPPORTED_FLAGS
                    .iter()
                    .find(|(flag, _)| *flag == name)
                    .map(|(flag, why)| format!("{flag}: {why}"))
            })
            .collect();
        if !refused.is_empty() {
            return Err(OptionsError::Unsupported(refused));
        }
        Options::try_parse_from(args).map_err(|e| OptionsError::Parse(e.to_string()))
    }

    /// Every value clap accepted but the controller cannot use.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.cluster_name.trim().is_empty() {
            problems.push("--cluster-name is required (and must not be empty)".to_string());
        }
        let sg = &self.backend_security_group;
        if !sg.is_empty() && !sg.starts_with("sg-") {
            problems.push(format!(
                "--backend-security-group={sg}: a security group ID (sg-...)"
            ));
        }
        if !matches!(self.default_target_type.as_str(), "instance" | "ip") {
            problems.push(format!(
                "--default-target-type={}: instance or ip",
                self.default_target_type
            ));
        }
        if let Err(e) = bind_address("--metrics-bind-addr", &self.metrics_bind_addr) {
            problems.push(e.to_string());
        }
        for (gate, value) in &self.feature_gates {
            if !FEATURE_GATES.iter().any(|(g, _)| g == gate) {
                let known: Vec<&str> = FEATURE_GATES.iter().map(|(g, _)| *g).collect();
                problems.push(format!(
                    "--feature-gates: {gate} is not implemented in this build (implemented: {})",
                    known.join(", ")
                ));
            } else if !matches!(value.as_str(), "true" | "false") {
                problems.push(format!("--feature-gates: {gate}={value}: true or false"));
            }
        }
        if self.load_balancer_class.trim().is_empty() {
            problems.push("--load-balancer-class must not be empty".to_string());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults_and_values() {
        let o = Options::parse_args(["albc", "--cluster-name=prod"]).unwrap();
        assert_eq!(o.ingress_class, "alb");
        assert!(o.enable_leader_election);
        assert_eq!(o.leader_election_id, "aws-load-balancer-controller-leader");
        assert_eq!(o.tgb_concurrency, 3);
        assert_eq!((o.ingress_concurrency, o.service_concurrency), (3, 3));
        assert_eq!(o.load_balancer_class, "service.k8s.aws/nlb");
        assert!(o.gate("NLBSecurityGroup") && o.gate("EnableServiceController"));
        assert!(o.enable_backend_security_group);
        assert!(o.backend_security_group.is_empty());
        assert_eq!(o.webhook_address(), Some("0.0.0.0:9443".parse().unwrap()));
        assert_eq!(
            o.webhook_cert_dir,
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
        );
        assert_eq!(
            bind_address("m", &o.metrics_bind_addr).unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        let o = Options::parse_args([
            "albc",
            "--cluster-name=prod",
            "--default-tags=team=edge,env=prod",
            "--enable-leader-election=false",
            "--metrics-bind-addr=0",
            "--webhook-bind-port=0",
            "--webhook-cert-dir=/certs",
            "--feature-gates=NLBSecurityGroup=false",
            "--load-balancer-class=example.com/nlb",
        ])
        .unwrap();
        assert!(!o.gate("NLBSecurityGroup") && o.gate("EnableServiceController"));
        assert_eq!(o.load_balancer_class, "example.com/nlb");
        assert_eq!(o.webhook_address(), None);
        assert_eq!(o.webhook_cert_dir, PathBuf::from("/certs"));
        assert_eq!(o.default_tags["team"], "edge");
        assert!(!o.enable_leader_election);
        assert_eq!(bind_address("m", &o.metrics_bind_addr).unwrap(), None);
    }

    #[test]
    fn refuses_unimplemented_and_bad_values_clearly() {
        let e = Options::parse_args([
            "albc",
            "--cluster-name=x",
            "--enable-wafv2=true",
            "--enable-shield",
            "--disable-ingress-class-annotation",
            "--webhook-bind-port=9443",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--enable-wafv2: AWS WAFv2")
                && e.contains("--enable-shield")
                && e.contains("--disable-ingress-class-annotation: the kubernetes.io"),
            "{e}"
        );
        let e = Options::parse_args([
            "albc",
            "--cluster-name=x",
            "--feature-gates=ALBSingleSubnet=true",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("ALBSingleSubnet is not implemented"), "{e}");
        let e = Options::parse_args([
            "albc",
            "--cluster-name=x",
            "--feature-gates=NLBSecurityGroup=yes",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("true or false"), "{e}");
        assert!(!e.contains("--webhook-bind-port"), "implemented now: {e}");
        let e = Options::parse_args(["albc", "--cluster-name=x", "--webhook-bind-port=70000"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--webhook-bind-port"), "{e}");
        let e = Options::parse_args(["albc", "--cluster-name=x", "--webhook-cert-dir="])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--webhook-cert-dir"), "{e}");
        assert!(
            Options::parse_args(["albc"]).is_err(),
            "--cluster-name is required"
        );
        let e = Options::parse_args(["albc", "--cluster-name=x", "--default-target-type=lambda"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("instance or ip"), "{e}");
        let e = Options::parse_args(["albc", "--cluster-name=x", "--backend-security-group=web"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--backend-security-group=web"), "{e}");
        assert!(
            Options::parse_args(["albc", "--cluster-name=x", "--default-tags=novalue"]).is_err()
        );
    }
}
