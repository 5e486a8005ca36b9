//! The AWS discoverer against moto and a real kube-apiserver, under the shipped RBAC
//! (`deploy/cloud-data-discoverer/rbac.yaml` bound to the test's ServiceAccount identity): the
//! catalog equals EC2's instance types (paged), orphaned EBS volumes are this cluster's only
//! (two clusters' disks in one account), a second run writes nothing, 503s are retried and
//! turn `/healthz` 503 until a good run, and the shipped RBAC is least privilege.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_ec2::config::{Credentials, Region};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use prometheus_client::registry::Registry;
use stratus_aws_api::{AwsApi, Ec2};
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};
use stratus_discoverer::aws::AwsDiscoverer;
use stratus_discoverer::metrics::Metrics;
use stratus_discoverer::outputs::Outputs;
use stratus_discoverer::plan::catalog;
use stratus_discoverer::reconciler::{Health, Reconciler, RetrySettings};
use stratus_discoverer::{Discoverer, InstanceType};
use stratus_runtime::backoff::Backoff;
use stratus_testenv::{Fault, FaultKind};
use stratus_testenv::{Identity, TestEnv};

mod common;

use common::{catalog_api, install, metrics_text, pv, ME};

const EBS: &str = "ebs.csi.aws.com";
const CLUSTER: &str = "cluster-a";
const OTHER: &str = "cluster-b";

fn ec2(endpoint: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        // The call guard owns retries, as in the binary.
        .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

/// A CSI volume tagged for `cluster` named `pv`.
async fn volume(
    ec2: &aws_sdk_ec2::Client,
    cluster: Option<&str>,
    csi: bool,
    pv: &str,
) -> Result<String> {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Volume);
    if csi {
        spec = spec.tags(
            Tag::builder()
                .key("ebs.csi.aws.com/cluster")
                .value("true")
                .build(),
        );
    }
    if let Some(c) = cluster {
        spec = spec.tags(
            Tag::builder()
                .key(format!("kubernetes.io/cluster/{c}"))
                .value("owned")
                .build(),
        );
    }
    spec = spec.tags(Tag::builder().key("CSIVolumeName").value(pv).build());
    let v = ec2
        .create_volume()
        .availability_zone("us-east-1a")
        .size(1)
        .tag_specifications(spec.build())
        .send()
        .await?;
    v.volume_id().map(str::to_owned).context("volume id")
}

#[tokio::test]
async fn aws_discoverer_on_moto_under_shipped_rbac() -> Result<()> {
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let admin = env.kube_client(Identity::Admin).await?;
    let setup = ec2(env.moto_endpoint());

    // Two clusters' disks in one account, plus a disk the CSI driver did not make.
    let used = volume(&setup, Some(CLUSTER), true, "pvc-used").await?;
    let orphan = volume(&setup, Some(CLUSTER), true, "pvc-orphan").await?;
    let _theirs = volume(&setup, Some(OTHER), true, "pvc-theirs").await?;
    let _not_csi = volume(&setup, Some(CLUSTER), false, "pvc-manual").await?;
    pv(&admin, "pvc-used", EBS).await?;
    let _ = used;

    // What EC2 says, read directly (uncounted): the expected catalog.
    // Moto answers DescribeInstanceTypes in one page whatever MaxResults says; the proxy pages
    // it as EC2 does, so the discoverer asks once per 100 types.
    let mut expected = Vec::new();
    let mut token = None;
    let mut offered = 0usize;
    loop {
        let page = setup
            .describe_instance_types()
            .max_results(100)
            .set_next_token(token)
            .send()
            .await?;
        offered += page.instance_types().len();
        expected.extend(
            page.instance_types()
                .iter()
                .filter_map(stratus_discoverer::aws::instance_type),
        );
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    let expected: Vec<InstanceType> = catalog(expected);
    assert!(
        expected.len() > 100,
        "moto offers {} types: paging is not exercised",
        expected.len()
    );

    let mut registry = Registry::default();
    let api_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let retry = RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(50)),
    };
    let discoverer: Arc<dyn Discoverer> = Arc::new(AwsDiscoverer::new(
        Ec2::new(
            ec2(env.aws_endpoint()),
            AwsApi::new("ec2", api_metrics, retry),
        ),
        Some(CLUSTER.into()),
    ));
    let metrics = Arc::new(Metrics::register(&mut registry));
    let health = Health::default();
    let me = env.kube_client(ME).await?;
    let reconciler = Reconciler::new(
        discoverer,
        Outputs::new(me),
        metrics,
        health.clone(),
        RetrySettings {
            attempts: 3,
            backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        },
    );

    // First run: the catalog and the orphan metric.
    env.reset_aws_request_counts().await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert_eq!(report.orphaned_disks, 1, "{report:?}");
    assert_eq!(
        report.writes, 1,
        "only the catalog is written for AWS: {report:?}"
    );
    assert!(health.is_ok());
    let counts = env.aws_request_counts().await?;
    let pages = counts
        .get("ec2:DescribeInstanceTypes")
        .copied()
        .unwrap_or(0);
    assert_eq!(
        pages as usize,
        offered.div_ceil(100),
        "one request per page of 100 ({offered} types): {counts:?}"
    );
    assert_eq!(counts.get("ec2:DescribeVolumes"), Some(&1), "{counts:?}");

    let stored = catalog_api(admin.clone())
        .get("for-cluster-autoscaler")
        .await?;
    assert_eq!(
        stored.data["instanceTypes"],
        serde_json::to_value(&expected)?
    );
    let text = metrics_text(&registry);
    assert!(
        text.contains(&format!(
            "cloud_data_discovery_orphaned_disk_info{{id=\"{orphan}\",name=\"pvc-orphan\"}} 1"
        )),
        "{text}"
    );
    assert!(
        !text.contains("pvc-theirs"),
        "another cluster's disk is never an orphan:\n{text}"
    );
    assert!(
        !text.contains("pvc-manual") && !text.contains("pvc-used"),
        "{text}"
    );
    assert!(
        text.contains("cloud_data_discovery_cloud_request_error{type=\"instance_types\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("cloud_data_discovery_update_resource_error 0"),
        "{text}"
    );
    assert!(
        text.contains("cloud_data_discovery_runs_total{result=\"ok\"} 1"),
        "{text}"
    );

    // Second run, nothing changed: zero Kubernetes writes.
    let writes = env.kube_writes_by(ME.username())?;
    let report = reconciler.run_once().await;
    assert_eq!(report.writes, 0, "{report:?}");
    assert_eq!(
        env.kube_writes_by(ME.username())?,
        writes,
        "a run with nothing changed wrote to Kubernetes"
    );

    // The orphan gets its PV: the metric is gone after the next run.
    pv(&admin, "pvc-orphan", EBS).await?;
    let report = reconciler.run_once().await;
    assert_eq!(report.orphaned_disks, 0);
    assert!(
        !metrics_text(&registry).contains("orphaned_disk_info{"),
        "series reset every run"
    );

    // EC2 answers 503: retried, then /healthz 503 and the error gauge; recovery after.
    env.set_aws_faults(&[Fault {
        service: Some("ec2".into()),
        action: Some("DescribeInstanceTypes".into()),
        kind: FaultKind::ServerError { status: 503 },
        rate: 1.0,
    }])
    .await?;
    env.reset_aws_request_counts().await?;
    let report = reconciler.run_once().await;
    assert_eq!(report.failed_steps, vec!["instance_types"], "{report:?}");
    assert!(!health.is_ok());
    let counts = env.aws_request_counts().await?;
    assert_eq!(
        counts.get("ec2:DescribeInstanceTypes"),
        Some(&6),
        "3 run attempts x 2 guarded calls: {counts:?}"
    );
    let answer = stratus_discoverer::http::answer(&registry, &health, "/healthz");
    assert_eq!(answer.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    assert!(metrics_text(&registry)
        .contains("cloud_data_discovery_cloud_request_error{type=\"instance_types\"} 1"));
    let unchanged = catalog_api(admin.clone())
        .get("for-cluster-autoscaler")
        .await?;
    assert_eq!(
        unchanged.data["instanceTypes"],
        serde_json::to_value(&expected)?,
        "a failed run keeps the last catalog"
    );

    env.set_aws_faults(&[]).await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert!(health.is_ok());
    assert_eq!(
        stratus_discoverer::http::answer(&registry, &health, "/healthz").status(),
        http::StatusCode::OK
    );

    // EC2 refuses the credentials: each step fails at once (no retry can help), clearly.
    env.set_aws_faults(&[Fault {
        service: Some("ec2".into()),
        action: None,
        kind: FaultKind::AuthFailure,
        rate: 1.0,
    }])
    .await?;
    env.reset_aws_request_counts().await?;
    let report = reconciler.run_once().await;
    assert_eq!(
        report.failed_steps,
        vec!["instance_types", "disks_meta"],
        "{report:?}"
    );
    assert!(
        report.errors[0].contains("refused the credentials for DescribeInstanceTypes"),
        "{report:?}"
    );
    let counts = env.aws_request_counts().await?;
    assert_eq!(
        (
            counts.get("ec2:DescribeInstanceTypes"),
            counts.get("ec2:DescribeVolumes")
        ),
        (Some(&1), Some(&1)),
        "refused credentials are not retried: {counts:?}"
    );
    assert!(!health.is_ok());
    env.set_aws_faults(&[]).await?;
    Ok(())
}

/// Deckhouse's template passes no `--cluster-id`: the discoverer finds the cluster's id in the
/// ownership tag of the instances its Nodes name, then reports this cluster's orphans only.
#[tokio::test]
async fn without_a_cluster_id_the_nodes_instances_name_the_cluster() -> Result<()> {
    use k8s_openapi::api::core::v1::{Node, NodeSpec};
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let admin = env.kube_client(Identity::Admin).await?;
    let setup = ec2(env.moto_endpoint());
    let orphan = volume(&setup, Some(CLUSTER), true, "pvc-orphan").await?;
    let _theirs = volume(&setup, Some(OTHER), true, "pvc-theirs").await?;

    let mut registry = Registry::default();
    let api_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let me = env.kube_client(ME).await?;
    let discoverer = Arc::new(
        AwsDiscoverer::new(
            Ec2::new(
                ec2(env.aws_endpoint()),
                AwsApi::new("ec2", api_metrics, RetryPolicy::default()),
            ),
            None,
        )
        .finding_identity_with(me.clone()),
    );
    let metrics = Arc::new(Metrics::register(&mut registry));
    let reconciler = Reconciler::new(
        discoverer.clone(),
        Outputs::new(me),
        metrics,
        Health::default(),
        RetrySettings {
            attempts: 1,
            backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        },
    );
    // No Node yet: nothing names the cluster, so no disk is anybody's orphan.
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert_eq!(report.orphaned_disks, 0, "{report:?}");

    // A node whose instance carries the cluster's tag.
    let image = setup
        .describe_images()
        .send()
        .await?
        .images()
        .first()
        .and_then(|i| i.image_id().map(str::to_owned))
        .context("moto has an image")?;
    let launched = setup
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(
                    Tag::builder()
                        .key(format!("kubernetes.io/cluster/{CLUSTER}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await?;
    let id = launched.instances()[0]
        .instance_id()
        .context("instance id")?
        .to_owned();
    let node = Node {
        metadata: kube::api::ObjectMeta {
            name: Some("worker-0".into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///us-east-1a/{id}")),
            ..Default::default()
        }),
        ..Default::default()
    };
    kube::Api::<Node>::all(admin)
        .create(&kube::api::PostParams::default(), &node)
        .await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert_eq!(report.orphaned_disks, 1, "{report:?}");
    let text = metrics_text(&registry);
    assert!(text.contains(&format!("id=\"{orphan}\"")), "{text}");
    assert!(!text.contains("pvc-theirs"), "{text}");
    Ok(())
}
