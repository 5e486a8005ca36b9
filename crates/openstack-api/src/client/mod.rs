//! The OpenStack client: one HTTP/TLS seam, one Keystone session, and a guarded client per
//! service (rate limiter, metrics with `cloud="openstack"`, retries, re-authentication, paging).

pub mod catalog;
pub mod errors;
pub mod http;
pub mod keystone;
pub mod page;
pub mod proxy;
pub mod service;
pub mod session;

use std::sync::Arc;

use ::http::{HeaderName, HeaderValue};
use stratus_cloud_kit::{
    ApiMetrics, BucketConfig, CallGuard, Endpoint, RetryPolicy, ServiceLimits,
};

pub use catalog::Service;
pub use service::ServiceClient;
pub use session::Session;

/// The `cloud` label of OpenStack metrics.
pub const CLOUD: &str = "openstack";

/// Nova's microversion: servers carry `flavor.original_name` from 2.47.
pub const NOVA_MICROVERSION: &str = "2.47";

/// Mutations that leave the same state when repeated, so a lost answer may be resent.
pub const IDEMPOTENT_MUTATIONS: &[&str] = &[
    "UpdateMembers",
    "DeleteLoadBalancer",
    "DeleteFloatingIp",
    "UpdateFloatingIp",
    "UpdatePort",
    "DeleteSecurityGroupRule",
    "UpdateRouterRoutes",
];

/// Request budgets: OpenStack publishes none, so a cautious default per endpoint (throttling
/// answers shrink them at run time).
pub fn default_limits() -> ServiceLimits {
    ServiceLimits {
        read: BucketConfig {
            rate: 20.0,
            burst: 100.0,
        },
        mutate: BucketConfig {
            rate: 10.0,
            burst: 50.0,
        },
    }
}

/// A guard for `service` (a metric label).
pub fn guard(service: &'static str, metrics: &Arc<ApiMetrics>) -> CallGuard {
    CallGuard::new(
        Endpoint {
            cloud: CLOUD,
            service,
            limits: default_limits(),
            idempotent_mutations: IDEMPOTENT_MUTATIONS,
        },
        metrics.clone(),
        RetryPolicy::default(),
    )
}

/// The clients of every service the provider calls, sharing one session.
#[derive(Debug, Clone)]
pub struct Clients {
    /// Nova (with the microversion header).
    pub compute: ServiceClient,
    /// Neutron.
    pub network: ServiceClient,
    /// The session (for the load balancer and block storage clients added later).
    pub session: Arc<Session>,
}

impl Clients {
    /// Clients over `session`, reporting into `metrics`.
    pub fn new(session: Arc<Session>, metrics: &Arc<ApiMetrics>) -> Clients {
        let microversion = vec![
            (
                HeaderName::from_static("x-openstack-nova-api-version"),
                HeaderValue::from_static(NOVA_MICROVERSION),
            ),
            (
                HeaderName::from_static("openstack-api-version"),
                HeaderValue::from_static("compute 2.47"),
            ),
        ];
        Clients {
            compute: ServiceClient::new(
                session.clone(),
                Service::Compute,
                guard("compute", metrics),
                microversion,
            ),
            network: ServiceClient::new(
                session.clone(),
                Service::Network,
                guard("network", metrics),
                Vec::new(),
            ),
            session,
        }
    }
}
