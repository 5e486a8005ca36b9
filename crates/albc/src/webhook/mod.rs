//! The admission webhooks, drop-in for upstream's: `mpod.elbv2.k8s.aws` adds the
//! `target-health.elbv2.k8s.aws/<binding>` readiness gates to new pods,
//! `mtargetgroupbinding.elbv2.k8s.aws` fills in a new TargetGroupBinding's target group ARN,
//! target type, IP address type and VPC from its target group, and
//! `vtargetgroupbinding.elbv2.k8s.aws` refuses TargetGroupBindings without a target group ARN,
//! with an unknown target type, or whose ARN or target type an update changes, and
//! `vingress.elbv2.k8s.aws` refuses an Ingress whose new class does not exist or whose params
//! do not exist or do not select its namespace. Served over HTTPS on every replica (not only the
//! leader).

pub mod caches;
pub mod defaults;
pub mod gates;
pub mod ingress;
pub mod metrics;
pub mod review;
pub mod server;
pub mod validate;

/// One webhook: its upstream name and its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Webhook {
    /// The name in the webhook configuration.
    pub name: &'static str,
    /// The path it is served on.
    pub path: &'static str,
}

/// The pod mutation (readiness gates).
pub const MUTATE_POD: Webhook = Webhook {
    name: "mpod.elbv2.k8s.aws",
    path: "/mutate-v1-pod",
};

/// The TargetGroupBinding defaults.
pub const MUTATE_TGB: Webhook = Webhook {
    name: "mtargetgroupbinding.elbv2.k8s.aws",
    path: "/mutate-elbv2-k8s-aws-v1beta1-targetgroupbinding",
};

/// The TargetGroupBinding validation.
pub const VALIDATE_TGB: Webhook = Webhook {
    name: "vtargetgroupbinding.elbv2.k8s.aws",
    path: "/validate-elbv2-k8s-aws-v1beta1-targetgroupbinding",
};

/// The Ingress validation.
pub const VALIDATE_INGRESS: Webhook = Webhook {
    name: "vingress.elbv2.k8s.aws",
    path: "/validate-networking-v1-ingress",
};

/// Upstream's default `--webhook-cert-dir`.
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Upstream's default `--webhook-bind-port`.
pub const DEFAULT_PORT: u16 = 9443;
