//! The upstream secure-serving flags (`--secure-port`, `--bind-address`, TLS files, delegated
//! authentication and authorization) as a clap group any binary can flatten, and what they make:
//! the server settings and the review clients.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_kube_kit::client::{client, from_kubeconfig, ClientError};
use stratus_runtime::duration::parse_go_duration;

use crate::client_auth::front_proxy::HeaderNames;
use crate::client_auth::{ClientAuthSettings, Lookup};
use crate::listener::ListenOptions;
use crate::sni::{parse_sni_cert_key, SniCert};
use crate::tls_policy::{parse_cipher_suite, parse_min_version, MinVersion, TlsPolicy};
use crate::{AlwaysAllow, DecisionTtls, ReviewClients, ServingConfig, TlsSource};

/// Secure serving flags, with the upstream names and defaults (the port's default is the
/// component's own, given to [`ServingArgs::serving`]).
#[derive(Debug, Clone, Args)]
pub struct ServingArgs {
    /// The port HTTPS (/healthz, /livez, /readyz, /metrics) is served on; 0 turns serving off
    /// [default: the component's port, 10258 for the cloud-controller-manager].
    #[arg(long = "secure-port")]
    pub secure_port: Option<u16>,
    /// The address HTTPS is served on (0.0.0.0 or :: for every interface).
    #[arg(long = "bind-address", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// PEM serving certificate (then the intermediates); a self-signed one when unset.
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Where the self-signed certificate is kept (<component>.crt/.key); in memory when unset.
    #[arg(long = "cert-dir")]
    pub cert_dir: Option<PathBuf>,
    /// Kubeconfig of the API server that reviews bearer tokens; the component's own when unset.
    #[arg(long = "authentication-kubeconfig")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the API server that authorizes requests; the component's own when unset.
    #[arg(long = "authorization-kubeconfig")]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// Do not read the client CA and front-proxy settings the flags leave out from the
    /// ConfigMap kube-system/extension-apiserver-authentication.
    #[arg(long = "authentication-skip-lookup", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub authentication_skip_lookup: bool,
    /// Start even when that ConfigMap cannot be read (then only bearer tokens authenticate,
    /// unless the flags give authorities).
    #[arg(long = "authentication-tolerate-lookup-failure", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub authentication_tolerate_lookup_failure: bool,
    /// PEM bundle of CAs whose client certificates authenticate their common name (groups: the
    /// organisations).
    #[arg(long = "client-ca-file")]
    pub client_ca_file: Option<PathBuf>,
    /// PEM bundle of CAs whose client certificates (front proxies) may name users in the
    /// --requestheader-username-headers.
    #[arg(long = "requestheader-client-ca-file")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front-proxy certificate may have; empty: any the CA signed.
    #[arg(long = "requestheader-allowed-names", value_delimiter = ',', value_parser = not_blank)]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user (the first set wins).
    #[arg(long = "requestheader-username-headers", value_delimiter = ',', default_value = "x-remote-user", value_parser = not_blank)]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the user's UID (the first set wins).
    #[arg(long = "requestheader-uid-headers", value_delimiter = ',', value_parser = not_blank)]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers naming groups.
    #[arg(long = "requestheader-group-headers", value_delimiter = ',', default_value = "x-remote-group", value_parser = not_blank)]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers carrying extra attributes.
    #[arg(long = "requestheader-extra-headers-prefix", value_delimiter = ',', default_value = "x-remote-extra-", value_parser = not_blank)]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// How long token reviews are cached.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// How long 'authorized' answers are cached.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long 'unauthorized' answers are cached.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Comma-separated cipher suites for TLS 1.2 (Go's names); TLS 1.3's are always on. Suites
    /// rustls does not implement (CBC, RC4, 3DES, RSA key exchange) are not offered, with a
    /// warning [default: every suite rustls implements].
    #[arg(long = "tls-cipher-suites", value_delimiter = ',', value_parser = parse_cipher_suite)]
    pub tls_cipher_suites: Vec<String>,
    /// Lowest TLS version: VersionTLS12 (default) or VersionTLS13; VersionTLS10 and
    /// VersionTLS11 are served as TLS 1.2.
    #[arg(long = "tls-min-version", value_parser = parse_min_version)]
    pub tls_min_version: Option<MinVersion>,
    /// More certificates, chosen by the server name a client asks for:
    /// `certfile,keyfile[:name1,name2]` (names: the certificate's when none), repeatable.
    #[arg(long = "tls-sni-cert-key", value_parser = parse_sni_cert_key)]
    pub tls_sni_cert_key: Vec<SniCert>,
    /// Concurrent streams a client may open on one HTTP/2 connection (0: 250, Go's default).
    #[arg(long = "http2-max-streams-per-connection", default_value_t = 0)]
    pub http2_max_streams_per_connection: u32,
    /// Bind with SO_REUSEPORT, so several processes may listen on the port.
    #[arg(long = "permit-port-sharing", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub permit_port_sharing: bool,
    /// Bind with SO_REUSEADDR (wildcard and specific addresses side by side, no wait for
    /// TIME_WAIT sockets).
    #[arg(long = "permit-address-sharing", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub permit_address_sharing: bool,
    /// Serve CPU profiles at /debug/pprof/ (behind authentication and authorization).
    #[arg(long = "profiling", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub profiling: bool,
    /// Go's lock-contention (block) profiling; a Rust process has no such profiler, so only
    /// `false` is accepted.
    #[arg(long = "contention-profiling", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true", value_parser = parse_contention_profiling)]
    pub contention_profiling: bool,
    /// Paths served without authentication or authorization (a trailing * matches a prefix).
    #[arg(long = "authorization-always-allow-paths", default_value = crate::DEFAULT_ALWAYS_ALLOW_PATHS, value_parser = parse_always_allow_paths)]
    pub authorization_always_allow_paths: AlwaysAllow,
}

/// `--contention-profiling`: only false has a meaning here.
fn parse_contention_profiling(value: &str) -> Result<bool, String> {
    match value {
        "false" | "0" | "f" | "F" | "FALSE" | "False" => Ok(false),
        "true" | "1" | "t" | "T" | "TRUE" | "True" => Err("Go's block/mutex contention profiler has no counterpart in a Rust process; the CPU profile (--profiling) is served".into()),
        _ => Err("not a bool".into()),
    }
}

/// A list item that is not blank (upstream refuses whitespace-only entries).
fn not_blank(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        Err("empty or whitespace-only entry".into())
    } else {
        Ok(value.trim().to_string())
    }
}

/// `--authorization-always-allow-paths`: comma-separated paths.
fn parse_always_allow_paths(value: &str) -> Result<AlwaysAllow, String> {
    AlwaysAllow::parse(&value.split(',').collect::<Vec<_>>())
}

impl ServingArgs {
    /// `--tls-min-version` and `--tls-cipher-suites`.
    pub fn tls_policy(&self) -> TlsPolicy {
        TlsPolicy {
            min_version: self.tls_min_version.unwrap_or_default(),
            cipher_suites: self.tls_cipher_suites.clone(),
            client_certificates: false,
            sni_certs: self.tls_sni_cert_key.clone(),
        }
    }

    /// The client-certificate and front-proxy flags.
    pub fn client_auth(&self) -> ClientAuthSettings {
        ClientAuthSettings {
            client_ca_file: self.client_ca_file.clone(),
            requestheader_client_ca_file: self.requestheader_client_ca_file.clone(),
            header_names: HeaderNames {
                allowed_names: self.requestheader_allowed_names.clone(),
                username: self.requestheader_username_headers.clone(),
                uid: self.requestheader_uid_headers.clone(),
                group: self.requestheader_group_headers.clone(),
                extra_prefix: self.requestheader_extra_headers_prefix.clone(),
            },
            lookup: if self.authentication_skip_lookup {
                Lookup::Off
            } else {
                Lookup::InCluster {
                    tolerate_failure: self.authentication_tolerate_lookup_failure,
                }
            },
            uid_from_certificates: true,
        }
    }

    /// What the flags ask for; `None` when the port is 0 (`default_port` when unset).
    pub fn serving(&self, default_port: u16) -> Option<ServingConfig> {
        let port = self.secure_port.unwrap_or(default_port);
        if port == 0 {
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
                hosts: crate::self_signed::default_hosts(self.bind_address),
            },
        };
        Some(ServingConfig {
            address: SocketAddr::new(self.bind_address, port),
            tls,
            tls_policy: self.tls_policy(),
            always_allow: self.authorization_always_allow_paths.clone(),
            token_ttl: self.authentication_token_webhook_cache_ttl,
            decision_ttls: DecisionTtls {
                allowed: self.authorization_webhook_cache_authorized_ttl,
                denied: self.authorization_webhook_cache_unauthorized_ttl,
            },
            access: crate::AccessRule::Path,
            client_auth: self.client_auth(),
            profiling: self.profiling,
            listen: ListenOptions {
                reuse_port: self.permit_port_sharing,
                reuse_address: self.permit_address_sharing,
                http2_max_streams: self.http2_max_streams_per_connection,
                http1_only: false,
            },
        })
    }

    /// The clients that review tokens and access: the component's own unless the review
    /// kubeconfig flags name others.
    pub async fn review_clients(&self, own: &kube::Client) -> Result<ReviewClients, ClientError> {
        Ok(ReviewClients {
            authentication: review_client(
                self.authentication_kubeconfig.as_deref(),
                "--authentication-kubeconfig",
                own,
            )
            .await?,
            authorization: review_client(
                self.authorization_kubeconfig.as_deref(),
                "--authorization-kubeconfig",
                own,
            )
            .await?,
        })
    }

    /// The problems of the review kubeconfig flags that are set, without building clients: what a
    /// binary that could not build its own client still checks before it reports.
    pub async fn review_kubeconfig_problems(&self) -> Vec<ClientError> {
        let mut problems = Vec::new();
        for (path, flag) in [
            (
                &self.authentication_kubeconfig,
                "--authentication-kubeconfig",
            ),
            (&self.authorization_kubeconfig, "--authorization-kubeconfig"),
        ] {
            if let Some(path) = path {
                if let Err(e) = from_kubeconfig(path, flag).await {
                    problems.push(e);
                }
            }
        }
        problems
    }
}

async fn review_client(
    path: Option<&Path>,
    flag: &str,
    own: &kube::Client,
) -> Result<kube::Client, ClientError> {
    match path {
        None => Ok(own.clone()),
        Some(path) => client(from_kubeconfig(path, flag).await?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        serving: ServingArgs,
    }

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
    }

    #[test]
    fn serving_flags() {
        let o = parse(&[]).unwrap();
        let c = o.serving.serving(10258).expect("served by default");
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
        assert!(!o.serving.authentication_skip_lookup);
        assert!(parse(&["--secure-port=0"])
            .unwrap()
            .serving
            .serving(10258)
            .is_none());

        let o = parse(&[
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
        let c = o.serving.serving(10258).unwrap();
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
        assert!(o.serving.authentication_skip_lookup);

        let o = parse(&["--cert-dir=/var/run/ccm"]).unwrap();
        assert!(matches!(
            o.serving.serving(10258).unwrap().tls,
            TlsSource::SelfSigned { cert_dir: Some(d), .. } if d == std::path::Path::new("/var/run/ccm")
        ));
        let o = parse(&["--authorization-always-allow-paths="]).unwrap();
        assert!(!o
            .serving
            .serving(1)
            .unwrap()
            .always_allow
            .matches("/healthz"));

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
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains(flag), "{bad}: {e}");
        }
    }
}
