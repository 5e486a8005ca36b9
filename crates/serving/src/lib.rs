//! Secure serving of the cloud-controller-manager, as upstream's `--secure-port`: HTTPS with the
//! given or a self-signed certificate; `/healthz`, `/livez` and `/readyz` open (the
//! `--authorization-always-allow-paths`), everything else (`/metrics`) for bearer tokens the
//! Kubernetes API server accepts (TokenReview) of users it allows the path
//! (SubjectAccessReview), both answers cached briefly.

pub mod args;
pub mod authn;
pub mod authz;
pub mod client_auth;
pub mod handler;
pub mod listener;
pub mod paths;
pub mod plain_http;
pub mod plain_metrics;
pub mod probes;
pub mod profiling;
pub mod readiness;
pub mod reload;
pub mod self_signed;
pub mod server;
pub mod sni;
pub mod tls;
pub mod tls_policy;
pub mod ttl_cache;

pub use args::ServingArgs;
pub use authz::{AccessRule, DecisionTtls, ResourceRule};
pub use client_auth::{ClientAuthSettings, Lookup};
pub use listener::{HttpsListener, Respond};
pub use paths::{AlwaysAllow, DEFAULT_ALWAYS_ALLOW_PATHS};
pub use plain_metrics::PlainMetricsServer;
pub use probes::ProbeServer;
pub use readiness::{Readiness, ReadyFlag};
pub use server::{ReviewClients, SecureServer, ServingConfig};
pub use tls::TlsSource;
pub use tls_policy::{MinVersion, TlsPolicy};
