//! The process: Kubernetes and AWS clients, HTTPS metrics and probes, the admission webhooks (on
//! every replica), leader election, then the TargetGroupBinding controller (with `--aws-vpc-id`
//! also the Ingress and Service drivers and the reaper) until shutdown or loss of the lease.

use std::sync::Arc;
use std::time::Duration;

use aws_config::Region;
use prometheus_client::registry::Registry;
use stratus_aws_api::elbv2::ElbV2Api;
use stratus_aws_api::subnets::SubnetCache;
use stratus_aws_api::AwsApi;
use stratus_aws_api::Ec2;
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};
use stratus_election::{ElectionConfig, ElectionMetrics, Leadership};
use stratus_kube_kit::client::client;
use stratus_runtime::backoff::Backoff;
use stratus_runtime::startup::Problems;
use stratus_serving::{
    AccessRule, AlwaysAllow, DecisionTtls, Readiness, ReviewClients, SecureServer, ServingConfig,
    TlsSource,
};

use crate::ingress::backend_group::{BackendGroup, SharedBackendGroup};
use crate::ingress::driver::IngressSettings;
use crate::ingress::{self};
use crate::metrics::TgbMetrics;
use crate::options::{bind_address, Options};
use crate::reaper;
use crate::service::{self, driver::ServiceSettings};
use crate::tgb::driver::{self as tgb_driver, TgbSettings};
use crate::tgb::sg_rules::NetworkingRules;
use crate::webhook::metrics::WebhookMetrics;
use crate::webhook::server::{WebhookServer, WebhookSettings};

/// The component name (election identity fallback).
pub const COMPONENT: &str = "aws-load-balancer-controller";

/// The AWS clients the flags and the AWS environment select (the SDK's retries off: the
/// shared call guard retries, rate-limits and counts).
pub struct AwsClients {
    /// Target registration.
    pub elbv2: ElbV2Api,
    /// Application and network load balancers (the same client behind a rate limiter of its
    /// own, so a burst of Ingress changes does not hold up target registration).
    pub alb: ElbV2Api,
    /// Subnet discovery (tags, as the CCM); its EC2 client also finds the targets' network
    /// interfaces and keeps their security-group rules (bindings' `spec.networking`).
    pub subnets: SubnetCache,
}

/// How the controller takes a region, for the message when it has none.
pub const HOW_TO_SET_REGION: &str =
    "set --aws-region or AWS_REGION, or run on EC2 with instance metadata reachable";

/// Builds [`AwsClients`] for `region` (see [`stratus_aws_api::region::resolve`]).
pub async fn aws_clients(
    opts: &Options,
    region: Region,
    registry: &mut Registry,
) -> anyhow::Result<AwsClients> {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .region(region)
        .load()
        .await;
    let mut conf = aws_sdk_elasticloadbalancingv2::config::Builder::from(&sdk);
    if let Some(url) = opts.aws_api_endpoints.get("elasticloadbalancing") {
        conf = conf.endpoint_url(url);
    }
    let metrics = Arc::new(ApiMetrics::register(registry));
    let retry = RetryPolicy {
        max_attempts: opts.aws_max_retries.max(1),
        ..RetryPolicy::default()
    };
    let client = aws_sdk_elasticloadbalancingv2::Client::from_conf(conf.build());
    let mut ec2_conf = aws_sdk_ec2::config::Builder::from(&sdk);
    if let Some(url) = opts.aws_api_endpoints.get("ec2") {
        ec2_conf = ec2_conf.endpoint_url(url);
    }
    let ec2_client = aws_sdk_ec2::Client::from_conf(ec2_conf.build());
    let ec2 = Ec2::new(ec2_client, AwsApi::new("ec2", metrics.clone(), retry));
    Ok(AwsClients {
        elbv2: ElbV2Api::new(
            client.clone(),
            AwsApi::new("elasticloadbalancingv2", metrics.clone(), retry),
        ),
        alb: ElbV2Api::new(
            client,
            AwsApi::new("elasticloadbalancingv2", metrics, retry),
        ),
        subnets: SubnetCache::new(ec2),
    })
}

/// Runs until `shutdown` completes or the lease is lost.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Everything needed, checked before anything serves: every problem named at once.
    let mut problems = Problems::new();
    for problem in opts.problems() {
        problems.push(problem);
    }
    let kube = problems
        .take(opts.kube.config().await)
        .and_then(|c| problems.take(client(c)));
    let region = problems.take(
        stratus_aws_api::region::resolve(opts.aws_region.as_deref(), HOW_TO_SET_REGION).await,
    );
    if opts.webhook_address().is_some() {
        problems.take(
            stratus_serving::tls::check(&TlsSource::PairDir {
                dir: opts.webhook_cert_dir.clone(),
                flag: "--webhook-cert-dir",
            })
            .map_err(|e| format!("{e:#}")),
        );
    }
    problems.finish()?;
    let (Some(kube), Some(region)) = (kube, region) else {
        anyhow::bail!("the startup check lost a part it found");
    };
    let mut registry = Registry::default();
    let AwsClients {
        elbv2,
        alb,
        subnets,
    } = aws_clients(&opts, region, &mut registry).await?;
    let subnets = Arc::new(subnets);
    // The bindings' spec.networking rules on their targets' security groups.
    let networking = NetworkingRules::new(subnets.ec2().clone(), opts.cluster_name.clone());
    let tgb_metrics = TgbMetrics::register(&mut registry);
    let election_metrics = ElectionMetrics::register(&mut registry);
    let webhook_metrics = WebhookMetrics::register(&mut registry);
    let readiness = Readiness::default();
    let webhook_filled = opts.webhook_address().map(|_| {
        readiness.add(
            "webhook-caches",
            "the webhooks' TargetGroupBinding and Service caches are not filled yet",
        )
    });
    let server = match bind_address("--metrics-bind-addr", &opts.metrics_bind_addr)? {
        None => None,
        Some(address) => {
            let config = ServingConfig {
                address,
                tls: TlsSource::SelfSigned {
                    cert_dir: None,
                    hosts: stratus_serving::self_signed::default_hosts(address.ip()),
                },
                tls_policy: stratus_serving::TlsPolicy::default(),
                always_allow: AlwaysAllow::parse(&["/healthz", "/livez", "/readyz"])
                    .expect("static paths"),
                token_ttl: Duration::from_secs(10),
                decision_ttls: DecisionTtls {
                    allowed: Duration::from_secs(10),
                    denied: Duration::from_secs(10),
                },
                access: AccessRule::Path,
                client_auth: stratus_serving::ClientAuthSettings::default(),
                profiling: false,
                listen: Default::default(),
            };
            let clients = ReviewClients {
                authentication: kube.clone(),
                authorization: kube.clone(),
            };
            Some(SecureServer::start(config, clients, Arc::new(registry), readiness).await?)
        }
    };
    let watch_namespace = Some(opts.watch_namespace.clone()).filter(|n| !n.is_empty());
    // Every replica answers admissions, the standbys too.
    let webhooks = match (opts.webhook_address(), webhook_filled) {
        (Some(address), Some(filled)) => {
            let settings = WebhookSettings {
                address,
                cert_dir: opts.webhook_cert_dir.clone(),
                namespace: watch_namespace.clone(),
                inject: opts.pod_readiness_gate,
            };
            Some(
                WebhookServer::start(&kube, elbv2.clone(), settings, webhook_metrics, filled)
                    .await?,
            )
        }
        _ => {
            tracing::info!("--webhook-bind-port=0: the admission webhooks are off");
            None
        }
    };
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = Box::pin(shutdown);
    let leadership = if opts.enable_leader_election {
        let config = ElectionConfig {
            lease_name: opts.leader_election_id.clone(),
            namespace: opts.leader_election_namespace.clone(),
            identity: stratus_election::args::identity(COMPONENT),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        let status = election_metrics.lease(&opts.leader_election_id);
        tokio::select! {
            l = Leadership::acquire(kube.clone(), config, status) => Some(l?),
            _ = &mut shutdown => return Ok(()),
        }
    } else {
        None
    };
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut lost = leadership.as_ref().map(Leadership::lost_signal);
    let settings = TgbSettings {
        namespace: watch_namespace,
        concurrency: opts.tgb_concurrency.max(1),
        coalesce: opts.tgb_coalesce,
        coalesce_max_delay: opts.tgb_coalesce_max_delay,
        sync_period: opts.sync_period,
        backoff: Backoff::new(Duration::from_secs(1), opts.tgb_max_backoff),
        readiness_gates: opts.pod_readiness_gate,
        gate_poll: Duration::from_secs(2),
    };
    let ingress_stop = stop_rx.clone();
    let stopping = async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    };
    // Ingresses need the VPC of their target groups.
    let ingress = match &opts.aws_vpc_id {
        Some(vpc) => {
            let backend = Arc::new(SharedBackendGroup::new(
                match (
                    opts.enable_backend_security_group,
                    opts.backend_security_group.as_str(),
                ) {
                    (false, _) => BackendGroup::Off,
                    (true, "") => BackendGroup::Managed,
                    (true, id) => BackendGroup::Given(id.to_string()),
                },
            ));
            let settings = IngressSettings {
                cluster: opts.cluster_name.clone(),
                ingress_class: opts.ingress_class.clone(),
                vpc: vpc.clone(),
                default_ip: opts.default_target_type == "ip",
                default_tags: opts.default_tags.clone(),
                backend: backend.clone(),
                concurrency: opts.ingress_concurrency,
            };
            let service_settings = ServiceSettings {
                cluster: opts.cluster_name.clone(),
                vpc: vpc.clone(),
                default_tags: opts.default_tags.clone(),
                class: opts.load_balancer_class.clone(),
                concurrency: opts.service_concurrency,
                security_groups: opts.gate("NLBSecurityGroup"),
                backend,
            };
            let mut stop = ingress_stop.clone();
            let ing = tokio::spawn(ingress::driver::run(
                kube.clone(),
                alb.clone(),
                subnets.clone(),
                settings,
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
            ));
            let mut stop = ingress_stop.clone();
            let reaper = tokio::spawn(reaper::driver::run(
                kube.clone(),
                alb.clone(),
                subnets.ec2().clone(),
                opts.cluster_name.clone(),
                opts.sync_period,
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
            ));
            let mut stop = ingress_stop;
            let svc = if opts.gate("EnableServiceController") {
                tokio::spawn(service::driver::run(
                    kube.clone(),
                    alb,
                    subnets,
                    service_settings,
                    async move {
                        let _ = stop.wait_for(|s| *s).await;
                    },
                ))
            } else {
                tracing::info!(
                    "feature gate EnableServiceController=false: NLB Services are not served"
                );
                tokio::spawn(async {})
            };
            Some((ing, svc, reaper))
        }
        None => {
            tracing::info!("no --aws-vpc-id: Ingresses and NLB Services are not served");
            None
        }
    };
    let mut ctl = tokio::spawn(tgb_driver::run(
        kube,
        elbv2,
        Some(networking),
        tgb_metrics,
        settings,
        stopping,
    ));
    let lease_lost = async {
        match lost.as_mut() {
            Some(l) => {
                let _ = l.wait_for(|x| *x).await;
            }
            None => std::future::pending().await,
        }
    };
    // As upstream: a replica that lost its lease stops acting at once, by exiting.
    let outcome = tokio::select! {
        r = &mut ctl => r.map_err(|e| anyhow::anyhow!("controller task: {e}")),
        _ = lease_lost => Err(anyhow::anyhow!("lost the leader lease {}", opts.leader_election_id)),
    };
    if let Some((i, s, r)) = ingress {
        i.abort();
        s.abort();
        r.abort();
    }
    if let Some(l) = leadership {
        l.release().await;
    }
    if let Some(w) = webhooks {
        w.shutdown(Duration::from_secs(2)).await;
    }
    if let Some(s) = server {
        s.shutdown(Duration::from_secs(2)).await;
    }
    outcome
}
