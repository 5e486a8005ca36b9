//! Process wiring shared by the binary and the benchmark: Kubernetes and AWS clients, metrics
//! and probe servers, the Event recorder, leader election in queue mode, then the mode's loop.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use stratus_aws_api::{AwsApi, Ec2};
use stratus_cloud_kit::{ApiMetrics, BucketConfig, RetryPolicy, ServiceLimits};
use stratus_election::{ElectionMetrics, LeaderStatus};
use stratus_runtime::startup::{Problems, StartupError};

use crate::config::{Mode, Options};
use crate::drain::Drainer;
use crate::drain_plan::DrainSettings;
use crate::events::{self, Recorder};
use crate::handler::Handler;
use crate::imds::{Imds, NodeMetadata};
use crate::imds_mode::ImdsMode;
use crate::metrics::Metrics;
use crate::node::NodeWriter;
use crate::queue::instances::Instances;
use crate::queue::nodes::NodeIndex;
use crate::queue::sqs::{Lifecycle, Queue};
use crate::queue::QueueMode;
use crate::serve::{self, Endpoint};
use crate::throttle::Throttle;
use crate::webhook::Webhook;

/// Why the handler could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Settings are missing or wrong (every one named).
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The Kubernetes client could not be configured (no kubeconfig or in-cluster config).
    #[error("kubernetes client: {0}")]
    Kube(String),
    /// The metrics or probes server could not bind its port.
    #[error("serving {what} on port {port}: {source}")]
    Serve {
        /// Which server: `"metrics"` or `"probes"`.
        what: &'static str,
        /// The port it tried to bind (`--prometheus-server-port` or `--probes-server-port`).
        port: u16,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// A setting is invalid or missing (API server URL, Events annotations, webhook, region).
    #[error("{0}")]
    Config(String),
    /// Acquiring the leader Lease failed (queue mode).
    #[error("leader election: {0}")]
    Election(String),
}

async fn kube_client(opts: &Options) -> Result<kube::Client, AppError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| AppError::Kube(stratus_kube_kit::client::infer_problem(&e)))?;
    if !opts.kubernetes_service_host.is_empty() && !opts.kubernetes_service_port.is_empty() {
        let url = format!(
            "https://{}:{}",
            opts.kubernetes_service_host, opts.kubernetes_service_port
        );
        config.cluster_url = url
            .parse()
            .map_err(|e| AppError::Config(format!("--kubernetes-service-host/port: {e}")))?;
    }
    // kube's built-in retry repeats 429 answers for minutes; a refused eviction must come back
    // at once so that the drain loop can retry it against the instance's deadline.
    config.default_retry = false;
    let config = stratus_kube_kit::client::env_proxied(config)
        .map_err(|e| AppError::Config(e.to_string()))?;
    kube::Client::try_from(config)
        .map_err(|e| AppError::Kube(stratus_runtime::redact::scrub(&e.to_string())))
}

/// Runs the handler until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    let opts = Arc::new(opts);
    // Everything needed, checked before anything serves: every problem named at once.
    let mut problems = Problems::new();
    if let Err(invalid) = opts.validate() {
        for problem in invalid {
            problems.push(problem);
        }
    }
    let client = problems.take(kube_client(&opts).await);
    let webhook = if opts.webhook_url.is_empty() {
        None
    } else {
        opts.webhook_template_text()
            .and_then(|template| {
                Webhook::new(
                    &opts.webhook_url,
                    &opts.webhook_headers,
                    template,
                    &opts.webhook_proxy,
                )
            })
            .map_err(|e| format!("webhook: {}", stratus_runtime::redact::scrub(&e)))
            .map_or_else(
                |e| {
                    problems.push(e);
                    None
                },
                Some,
            )
    };
    problems.finish()?;
    let Some(client) = client else {
        return Err(AppError::Config("the startup check lost the client".into()));
    };
    tracing::info!(settings = %opts.summary(), "aws-node-termination-handler arguments");
    let throttle = Arc::new(Throttle::new(opts.kube_api_qps, opts.kube_api_burst));
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(&mut registry));
    let aws_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let leader_status =
        ElectionMetrics::register(&mut registry).lease(&opts.leader_elect_lease_name);
    let registry = Arc::new(registry);
    if opts.enable_prometheus_server {
        serve::spawn(
            opts.prometheus_server_port,
            Endpoint::Metrics(registry.clone()),
        )
        .await
        .map_err(|source| AppError::Serve {
            what: "metrics",
            port: opts.prometheus_server_port,
            source,
        })?;
    }
    if opts.enable_probes_server {
        serve::spawn(
            opts.probes_server_port,
            Endpoint::Probe(opts.probes_server_endpoint.clone()),
        )
        .await
        .map_err(|source| AppError::Serve {
            what: "probes",
            port: opts.probes_server_port,
            source,
        })?;
    }

    let imds = (opts.mode() == Mode::Imds).then(|| {
        Arc::new(Imds::new(
            &opts.metadata_url,
            opts.metadata_tries.max(1) as u32,
        ))
    });
    let metadata = match &imds {
        Some(imds) => imds.node_metadata().await,
        None => NodeMetadata::default(),
    };
    let mut annotations =
        events::parse_extra_annotations(&opts.kubernetes_events_extra_annotations)
            .map_err(AppError::Config)?;
    if opts.mode() == Mode::Imds {
        let mut base = events::instance_annotations(&metadata);
        base.append(&mut annotations);
        annotations = base;
    }
    let recorder = if opts.emit_kubernetes_events {
        Recorder::new(
            client.clone(),
            throttle.clone(),
            &opts.node_name,
            annotations,
        )
    } else {
        Recorder::disabled()
    };
    let settings = DrainSettings {
        ignore_daemon_sets: opts.ignore_daemon_sets,
        delete_local_data: opts.delete_local_data,
        grace_override: opts.pod_grace_override(),
        own_pod: (!opts.pod_name.is_empty())
            .then(|| (opts.pod_namespace.clone(), opts.pod_name.clone())),
    };
    let handler = Handler {
        opts: opts.clone(),
        nodes: NodeWriter::new(client.clone(), throttle.clone(), opts.dry_run),
        drainer: Drainer::new(
            client.clone(),
            throttle.clone(),
            settings,
            opts.use_apiserver_cache,
            recorder.clone(),
        ),
        recorder,
        metrics,
        webhook,
        metadata: Arc::new(metadata.clone()),
    };

    match imds {
        Some(imds) => {
            ImdsMode { handler, imds }.run(shutdown).await;
            Ok(())
        }
        None => {
            run_queue(
                opts,
                client,
                handler,
                aws_metrics,
                leader_status,
                &metadata,
                shutdown,
            )
            .await
        }
    }
}

async fn run_queue(
    opts: Arc<Options>,
    client: kube::Client,
    handler: Handler,
    aws_metrics: Arc<ApiMetrics>,
    leader_status: LeaderStatus,
    metadata: &NodeMetadata,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    let region = [
        opts.aws_region.clone(),
        metadata.region.clone(),
        opts.region_from_queue_url().unwrap_or_default(),
    ]
    .into_iter()
    .find(|r| !r.is_empty())
    .ok_or_else(|| {
        AppError::Config(
            "unable to find the AWS region to process queue events (set --aws-region)".into(),
        )
    })?;
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region));
    if !opts.aws_endpoint.is_empty() {
        loader = loader.endpoint_url(&opts.aws_endpoint);
    }
    let sdk = loader.load().await;
    let retry = RetryPolicy::default();
    // SQS publishes no request quota for these calls; a generous bucket still caps a storm.
    let sqs_limits = ServiceLimits {
        read: BucketConfig {
            rate: 100.0,
            burst: 300.0,
        },
        mutate: BucketConfig {
            rate: 100.0,
            burst: 300.0,
        },
    };
    let queue = Queue::start(
        aws_sdk_sqs::Client::new(&sdk),
        AwsApi::with_limits("sqs", aws_metrics.clone(), retry, sqs_limits),
        opts.queue_url.clone(),
        opts.sqs_msg_visibility_timeout_sec as i32,
    );
    let lifecycle = Lifecycle::new(
        aws_sdk_autoscaling::Client::new(&sdk),
        AwsApi::new("autoscaling", aws_metrics.clone(), retry),
    );
    let instances = Instances::start(Ec2::new(
        aws_sdk_ec2::Client::new(&sdk),
        AwsApi::new("ec2", aws_metrics, retry),
    ));
    let nodes = NodeIndex::start(client.clone());
    let mode = QueueMode {
        handler,
        queue,
        lifecycle,
        instances,
        nodes,
    };
    if !opts.leader_elect {
        mode.run(shutdown).await;
        return Ok(());
    }
    let namespace = if opts.pod_namespace.is_empty() {
        "kube-system".to_owned()
    } else {
        opts.pod_namespace.clone()
    };
    let identity = format!(
        "{}_{:08x}",
        if opts.pod_name.is_empty() {
            "nth"
        } else {
            &opts.pod_name
        },
        rand::random::<u32>()
    );
    let config = stratus_election::ElectionConfig {
        lease_name: opts.leader_elect_lease_name.clone(),
        namespace,
        identity,
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    loop {
        let acquire = stratus_election::Leadership::acquire(
            client.clone(),
            config.clone(),
            leader_status.clone(),
        );
        let mut leadership = tokio::select! {
            l = acquire => l.map_err(|e| AppError::Election(e.to_string()))?,
            _ = shutdown.clone() => return Ok(()),
        };
        let lost = tokio::select! {
            _ = mode.clone().run(shutdown.clone()) => false,
            _ = leadership.lost() => true,
        };
        if !lost {
            leadership.release().await;
            return Ok(());
        }
        tracing::warn!("lost the leader lease; waiting to be leader again");
    }
}
