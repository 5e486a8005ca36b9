//! The controller-runtime and Cluster API manager flags of capdvp beside Stratus's own (contract
//! §4.7): the metrics endpoint (`--metrics-bind-address`, `--metrics-secure`, `--metrics-cert-*`,
//! Cluster API's `--diagnostics-address`/`--insecure-diagnostics`), the runtime-extension
//! server (`--webhook-*`), `--enable-http2`, the zap logging flags, and the Cluster API family
//! (`--sync-period`, `--watch-filter`, `--kube-api-qps/-burst`, `--feature-gates`,
//! `--profiler-address`). What they make is resolved here, without I/O; values with no meaning
//! for capdvp are refused by name with the reason ([`ManagerArgs::refusals`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_runtime::duration::parse_go_duration;
use stratus_serving::probes::{parse_bind_address, BindAddress};
use stratus_serving::TlsSource;

use crate::zap::ZapArgs;

/// controller-runtime's webhook certificate directory.
pub const DEFAULT_WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// controller-runtime's webhook port.
pub const DEFAULT_WEBHOOK_PORT: u16 = 9443;

/// The manager flags.
#[derive(Debug, Clone, Args)]
pub struct ManagerArgs {
    /// `/metrics` here (`:8443`, `host:port`; `0` = off, the default as Deckhouse's capdvp).
    #[arg(long = "metrics-bind-address", alias = "diagnostics-address", default_value = "0", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// HTTPS with bearer-token authentication (TokenReview) and authorization
    /// (SubjectAccessReview of `get` on the path), as controller-runtime's filter; false: plain
    /// HTTP.
    #[arg(long = "metrics-secure", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub metrics_secure: bool,
    /// Cluster API's spelling of `--metrics-secure=false`.
    #[arg(long = "insecure-diagnostics", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub insecure_diagnostics: bool,
    /// Directory of the metrics serving certificate (self-signed in memory when unset).
    #[arg(long = "metrics-cert-path", value_parser = parse_dir)]
    pub metrics_cert_path: Option<PathBuf>,
    /// Certificate file name in --metrics-cert-path.
    #[arg(long = "metrics-cert-name", default_value = "tls.crt")]
    pub metrics_cert_name: String,
    /// Key file name in --metrics-cert-path.
    #[arg(long = "metrics-cert-key", default_value = "tls.key")]
    pub metrics_cert_key: String,
    /// Port of the runtime-extension server; 0 turns it off (upstream reads 0 as 9443).
    #[arg(long = "webhook-port", default_value_t = DEFAULT_WEBHOOK_PORT)]
    pub webhook_port: u16,
    /// Address of the runtime-extension server [default: every interface].
    #[arg(long = "webhook-host")]
    pub webhook_host: Option<IpAddr>,
    /// Directory of the runtime-extension serving certificate (read again when it changes).
    #[arg(long = "webhook-cert-dir", alias = "webhook-cert-path", default_value = DEFAULT_WEBHOOK_CERT_DIR, value_parser = parse_dir)]
    pub webhook_cert_dir: PathBuf,
    /// Certificate file name in the webhook certificate directory.
    #[arg(long = "webhook-cert-name", default_value = "tls.crt")]
    pub webhook_cert_name: String,
    /// Key file name in the webhook certificate directory (`--webhook-key-name` too).
    #[arg(
        long = "webhook-cert-key",
        alias = "webhook-key-name",
        default_value = "tls.key"
    )]
    pub webhook_cert_key: String,
    /// HTTP/2 on the metrics and extension servers (off by default, as controller-runtime).
    #[arg(long = "enable-http2", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub enable_http2: bool,
    /// How often a settled DeckhouseMachine is looked at again without any event.
    #[arg(long = "sync-period", default_value = "10m", value_parser = parse_go_duration)]
    pub sync_period: Duration,
    /// Reconcile only DeckhouseMachines and DeckhouseClusters labelled
    /// `cluster.x-k8s.io/watch-filter=<value>` (all when empty).
    #[arg(long = "watch-filter", default_value = "")]
    pub watch_filter: String,
    /// Requests per second to the management cluster, on average [default: no client-side limit].
    #[arg(long = "kube-api-qps", value_parser = parse_qps)]
    pub kube_api_qps: Option<f64>,
    /// Requests at once above --kube-api-qps [default: 30 when --kube-api-qps is set].
    #[arg(long = "kube-api-burst")]
    pub kube_api_burst: Option<u32>,
    /// `Gate=true,…`: capdvp has no feature gates; any gate named is refused.
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: String,
    /// Go's pprof endpoint: only empty (capdvp is not a Go program).
    #[arg(long = "profiler-address", default_value = "")]
    pub profiler_address: String,
    /// Logging as controller-runtime's zap flags.
    #[command(flatten)]
    pub zap: ZapArgs,
}

/// A directory; empty allowed (kubebuilder's "unset").
fn parse_dir(value: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(value))
}

fn parse_qps(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(q) if q > 0.0 && q.is_finite() => Ok(q),
        _ => Err("a positive number".into()),
    }
}

/// The certificate source of a cert directory: `tls.crt`/`tls.key` as controller-runtime's
/// default layout, or other names (`--webhook-cert-name`, `--webhook-cert-key`).
pub fn cert_source(dir: &std::path::Path, cert: &str, key: &str) -> TlsSource {
    if cert == stratus_serving::tls::PAIR_DIR_CERT && key == stratus_serving::tls::PAIR_DIR_KEY {
        TlsSource::PairDir {
            dir: dir.to_path_buf(),
            flag: "--webhook-cert-dir",
        }
    } else {
        TlsSource::Files {
            cert: dir.join(cert),
            key: dir.join(key),
        }
    }
}

/// The files a [`cert_source`] reads (for the startup check's messages).
pub fn cert_files(source: &TlsSource) -> Vec<PathBuf> {
    match source {
        TlsSource::PairDir { dir, .. } => vec![
            dir.join(stratus_serving::tls::PAIR_DIR_CERT),
            dir.join(stratus_serving::tls::PAIR_DIR_KEY),
        ],
        TlsSource::Files { cert, key } => vec![cert.clone(), key.clone()],
        TlsSource::SelfSigned { .. } => Vec::new(),
    }
}

/// The metrics endpoint the flags ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsPlan {
    /// Where.
    pub address: SocketAddr,
    /// HTTPS with authentication and authorization (else plain HTTP).
    pub secure: bool,
    /// The certificate when secure.
    pub tls: TlsSource,
}

/// The Cluster API client limit: `burst` requests at once, `qps` on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimit {
    /// Requests per second.
    pub qps: f64,
    /// Requests at once.
    pub burst: u32,
}

impl ManagerArgs {
    /// How the metrics and extension servers listen (`--enable-http2`).
    pub fn listen(&self) -> stratus_serving::listener::ListenOptions {
        stratus_serving::listener::ListenOptions {
            http1_only: !self.enable_http2,
            ..Default::default()
        }
    }

    /// Every flag value refused, each with its reason.
    pub fn refusals(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.profiler_address.is_empty() {
            out.push(format!(
                "--profiler-address={}: this is Go's pprof endpoint and capdvp is not a Go program; \
                 remove the flag (metrics: --metrics-bind-address)",
                self.profiler_address
            ));
        }
        for gate in self
            .feature_gates
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
        {
            match gate.split_once('=') {
                Some((name, value)) if value.parse::<bool>().is_ok() => out.push(format!(
                    "--feature-gates: unknown feature gate {name:?}: capdvp has no feature gates"
                )),
                _ => out.push(format!(
                    "--feature-gates: {gate:?} is not Name=true or Name=false"
                )),
            }
        }
        out
    }

    /// The metrics endpoint, if any.
    pub fn metrics(&self) -> Option<MetricsPlan> {
        let address = self.metrics_bind_address.0?;
        let tls = match &self.metrics_cert_path {
            Some(dir) if !dir.as_os_str().is_empty() => TlsSource::Files {
                cert: dir.join(&self.metrics_cert_name),
                key: dir.join(&self.metrics_cert_key),
            },
            _ => TlsSource::SelfSigned {
                cert_dir: None,
                hosts: stratus_serving::self_signed::default_hosts(address.ip()),
            },
        };
        Some(MetricsPlan {
            address,
            secure: self.metrics_secure && !self.insecure_diagnostics,
            tls,
        })
    }

    /// The extension server's address, `None` when `--webhook-port=0`.
    pub fn extension_address(&self) -> Option<SocketAddr> {
        (self.webhook_port != 0).then(|| {
            SocketAddr::new(
                self.webhook_host
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                self.webhook_port,
            )
        })
    }

    /// The extension server's certificate (an empty `--webhook-cert-path` is the default
    /// directory, as controller-runtime reads it).
    pub fn extension_tls(&self) -> TlsSource {
        let dir = if self.webhook_cert_dir.as_os_str().is_empty() {
            PathBuf::from(DEFAULT_WEBHOOK_CERT_DIR)
        } else {
            self.webhook_cert_dir.clone()
        };
        cert_source(&dir, &self.webhook_cert_name, &self.webhook_cert_key)
    }

    /// `--watch-filter`, when set.
    pub fn watch_filter(&self) -> Option<&str> {
        Some(self.watch_filter.as_str()).filter(|f| !f.is_empty())
    }

    /// The client-side limit on management-cluster requests, when asked for.
    pub fn client_limit(&self) -> Option<ClientLimit> {
        match (self.kube_api_qps, self.kube_api_burst) {
            (None, None) => None,
            (qps, burst) => Some(ClientLimit {
                qps: qps.unwrap_or(20.0),
                burst: burst.unwrap_or(30).max(1),
            }),
        }
    }
}

impl ClientLimit {
    /// A client for `config` whose requests wait for the limit (`burst` per `burst / qps`
    /// seconds: the average is `qps`, no more than `burst` go at once).
    pub fn client(&self, config: kube::Config) -> Result<kube::Client, String> {
        let window = Duration::from_secs_f64(f64::from(self.burst) / self.qps);
        let layer = tower::limit::RateLimitLayer::new(u64::from(self.burst), window);
        Ok(kube::client::ClientBuilder::try_from(config)
            .map_err(|e| stratus_runtime::redact::scrub(&e.to_string()))?
            .with_layer(&layer)
            .build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Options;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(
            std::iter::once("capdvp-controller-manager").chain(args.iter().copied()),
        )
    }

    /// Every flag of the contract's §4.7 (Deckhouse's capdvp main, controller-runtime, the Cluster
    /// API family) parses.
    #[test]
    fn every_manager_flag_of_the_contract_parses() {
        let flags = [
            "--leader-elect",
            "--leader-elect=true",
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=2s",
            "--health-probe-bind-address=:8081",
            "--metrics-bind-address=:8443",
            "--metrics-bind-address=0",
            "--metrics-secure",
            "--metrics-secure=false",
            "--metrics-cert-path=/certs",
            "--metrics-cert-name=tls.crt",
            "--metrics-cert-key=tls.key",
            "--diagnostics-address=:8443",
            "--insecure-diagnostics",
            "--webhook-port=9443",
            "--webhook-host=127.0.0.1",
            "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
            "--webhook-cert-path=/certs",
            "--webhook-cert-name=tls.crt",
            "--webhook-cert-key=tls.key",
            "--webhook-key-name=tls.key",
            "--enable-http2=false",
            "--enable-http2",
            "--tls-min-version=VersionTLS12",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--zap-devel",
            "--zap-devel=false",
            "--zap-encoder=json",
            "--zap-log-level=info",
            "--zap-stacktrace-level=error",
            "--zap-time-encoding=rfc3339",
            "--kubeconfig=/etc/kubernetes/admin.conf",
            "--watch-namespace=d8-cloud-instance-manager",
            "--watch-filter=tenant-a",
            "--sync-period=10m",
            "--kube-api-qps=20",
            "--kube-api-burst=30",
            "--feature-gates=",
            "--profiler-address=",
            "--deckhousemachine-concurrency=10",
            "--v=2",
            "--logging-format=json",
        ];
        for flag in flags {
            parse(&[flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
        }
    }

    /// Each implemented flag changes what the process does.
    #[test]
    fn each_flag_changes_behaviour() {
        let o = parse(&[]).unwrap();
        let m = &o.manager;
        assert_eq!(
            m.metrics(),
            None,
            "metrics off by default, as Deckhouse's capdvp"
        );
        assert_eq!(
            m.extension_address(),
            Some(std::net::SocketAddr::from((
                std::net::Ipv4Addr::UNSPECIFIED,
                9443
            )))
        );
        assert_eq!(
            m.extension_tls(),
            TlsSource::PairDir {
                dir: DEFAULT_WEBHOOK_CERT_DIR.into(),
                flag: "--webhook-cert-dir"
            }
        );
        assert!(m.refusals().is_empty());
        assert_eq!(m.sync_period, Duration::from_secs(600));
        assert_eq!(m.watch_filter(), None);
        assert_eq!(m.client_limit(), None);
        assert!(o.serving.serving(crate::app::DEFAULT_SECURE_PORT).is_none());

        let secure = parse(&["--metrics-bind-address=127.0.0.1:8443"]).unwrap();
        let plan = secure.manager.metrics().unwrap();
        assert_eq!(plan.address, "127.0.0.1:8443".parse().unwrap());
        assert!(plan.secure);
        assert!(matches!(
            plan.tls,
            TlsSource::SelfSigned { cert_dir: None, .. }
        ));
        for insecure in [
            &["--metrics-bind-address=:8080", "--metrics-secure=false"][..],
            &["--diagnostics-address=:8080", "--insecure-diagnostics"][..],
        ] {
            let plan = parse(insecure).unwrap().manager.metrics().unwrap();
            assert!(!plan.secure, "{insecure:?}");
            assert_eq!(
                plan.address,
                std::net::SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 8080))
            );
        }
        let files = parse(&[
            "--metrics-bind-address=:8443",
            "--metrics-cert-path=/m",
            "--metrics-cert-name=c.pem",
            "--metrics-cert-key=k.pem",
        ])
        .unwrap();
        assert_eq!(
            files.manager.metrics().unwrap().tls,
            TlsSource::Files {
                cert: "/m/c.pem".into(),
                key: "/m/k.pem".into()
            }
        );

        let hook = parse(&[
            "--webhook-port=10443",
            "--webhook-host=127.0.0.1",
            "--webhook-cert-path=/w",
        ])
        .unwrap();
        assert_eq!(
            hook.manager.extension_address(),
            Some("127.0.0.1:10443".parse().unwrap())
        );
        assert_eq!(
            hook.manager.extension_tls(),
            TlsSource::PairDir {
                dir: "/w".into(),
                flag: "--webhook-cert-dir"
            }
        );
        for names in [
            &[
                "--webhook-cert-dir=/w",
                "--webhook-cert-name=a.crt",
                "--webhook-cert-key=a.key",
            ][..],
            &[
                "--webhook-cert-dir=/w",
                "--webhook-cert-name=a.crt",
                "--webhook-key-name=a.key",
            ][..],
        ] {
            assert_eq!(
                parse(names).unwrap().manager.extension_tls(),
                TlsSource::Files {
                    cert: "/w/a.crt".into(),
                    key: "/w/a.key".into()
                },
                "{names:?}"
            );
        }
        assert_eq!(
            parse(&["--webhook-cert-path="])
                .unwrap()
                .manager
                .extension_tls(),
            m.extension_tls()
        );
        assert_eq!(
            parse(&["--webhook-port=0"])
                .unwrap()
                .manager
                .extension_address(),
            None
        );

        let o = parse(&["--sync-period=1m", "--watch-filter=a"]).unwrap();
        assert_eq!(o.manager.sync_period, Duration::from_secs(60));
        assert_eq!(o.manager.watch_filter(), Some("a"));
        assert_eq!(
            crate::controllers::watch_filter_config(o.manager.watch_filter()).label_selector,
            Some("cluster.x-k8s.io/watch-filter=a".into())
        );
        assert_eq!(
            crate::controllers::watch_filter_config(None).label_selector,
            None
        );
        assert_eq!(
            parse(&["--kube-api-qps=5"]).unwrap().manager.client_limit(),
            Some(ClientLimit {
                qps: 5.0,
                burst: 30
            })
        );
        assert_eq!(
            parse(&["--kube-api-burst=7"])
                .unwrap()
                .manager
                .client_limit(),
            Some(ClientLimit {
                qps: 20.0,
                burst: 7
            })
        );
        let o = parse(&["--watch-namespace=ns", "--deckhousemachine-concurrency=3"]).unwrap();
        assert_eq!(o.namespace.as_deref(), Some("ns"));
        assert_eq!(o.concurrency, 3);
    }

    /// A local API server stand-in: answers every request with `{}` at once, counts them.
    async fn answering_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (format!("http://{address}"), count)
    }

    async fn ten_requests(client: &kube::Client) -> Duration {
        let started = tokio::time::Instant::now();
        for _ in 0..10 {
            let request = http::Request::get("/version").body(Vec::new()).unwrap();
            client.request_text(request).await.unwrap();
        }
        started.elapsed()
    }

    /// `--kube-api-qps/-burst` hold requests back; without them nothing waits.
    #[tokio::test]
    async fn the_client_limit_paces_requests() {
        let (url, count) = answering_server().await;
        let config = || kube::Config::new(url.parse().unwrap());
        let free = kube::Client::try_from(config()).unwrap();
        let unlimited = ten_requests(&free).await;
        let limit = ClientLimit {
            qps: 10.0,
            burst: 2,
        };
        let limited = ten_requests(&limit.client(config()).unwrap()).await;
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 20);
        // Two at once per 0.2 s window: the tenth request goes in the fifth window (>= 0.8 s).
        assert!(limited >= Duration::from_millis(750), "{limited:?}");
        assert!(unlimited < Duration::from_millis(500), "{unlimited:?}");
    }

    #[test]
    fn values_without_a_meaning_are_refused_by_name() {
        for (args, named) in [
            (
                &["--profiler-address=:6060"][..],
                "--profiler-address=:6060",
            ),
            (&["--feature-gates=MachinePool=true"][..], "\"MachinePool\""),
            (&["--feature-gates=MachinePool"][..], "not Name=true"),
        ] {
            let refusals = parse(args).unwrap().manager.refusals();
            assert_eq!(refusals.len(), 1, "{args:?}: {refusals:?}");
            assert!(refusals[0].contains(named), "{args:?}: {refusals:?}");
        }
        for bad in [
            "--kube-api-qps=0",
            "--kube-api-qps=fast",
            "--sync-period=often",
            "--metrics-bind-address=everywhere",
            "--webhook-port=99999",
            "--webhook-host=localhost",
            "--zap-encoder=logfmt",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert!(
                e.to_string().contains(bad.split('=').next().unwrap()),
                "{bad}: {e}"
            );
        }
    }
}
