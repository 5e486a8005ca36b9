//! The OpenStack discoverer against a real Keystone and the OpenStack simulators, writing to a
//! real kube-apiserver under the shipped RBAC: the discovery document and the catalog equal what
//! the cloud offers, each list is asked once per run with one login, orphaned Cinder volumes are
//! this cluster's only (two clusters' volumes in one project), a second run writes nothing and
//! logs in no more, a 503 is retried then turns `/healthz` 503 until a good run, and refused
//! credentials fail at once with a clear error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use http::Method;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use stratus_cloud_kit::ApiMetrics;
use stratus_discoverer::app::openstack_backend;
use stratus_discoverer::metrics::Metrics;
use stratus_discoverer::outputs::Outputs;
use stratus_discoverer::reconciler::{Health, Reconciler, RetrySettings};
use stratus_discoverer::Discoverer;
use stratus_openstack_api::client::{guard, Service, ServiceClient, Session};
use stratus_runtime::backoff::Backoff;
use stratus_testenv::{Fault, FaultKind};
use stratus_testenv::{Identity, OpenStackEnv, TestEnv};

mod common;

use common::{catalog_api, install, metrics_text, pv, ME};

const CINDER: &str = "cinder.csi.openstack.org";
const CLUSTER: &str = "3f1e6c1a-0000-4000-8000-00000000000a";
const OTHER: &str = "3f1e6c1a-0000-4000-8000-00000000000b";

fn lookup(cloud: &OpenStackEnv, extra: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let mut vars: BTreeMap<String, String> = cloud.env_vars().into_iter().collect();
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    move |k| vars.get(k).cloned()
}

/// A client of `service` for fixtures (its calls are counted too: reset the counters after).
fn fixture_client(cloud: &OpenStackEnv, service: Service) -> Result<ServiceClient> {
    let settings = stratus_discoverer::openstack::env::settings(&lookup(cloud, &[]))
        .map_err(anyhow::Error::msg)?;
    let metrics = Arc::new(ApiMetrics::register(&mut Registry::default()));
    let http = stratus_openstack_api::client::http::HttpClient::new(
        &Default::default(),
        Duration::from_secs(30),
    )?;
    let session = Arc::new(Session::new(
        http,
        &settings.auth_url,
        settings.credentials,
        Default::default(),
        Some(settings.region),
        guard("identity", &metrics),
    ));
    Ok(ServiceClient::new(
        session,
        service,
        guard(service.label(), &metrics),
        Vec::new(),
    ))
}

/// A Cinder volume named `name`, with this `cluster`'s CSI metadata when given.
async fn volume(cinder: &ServiceClient, name: &str, cluster: Option<&str>) -> Result<String> {
    let metadata = match cluster {
        Some(c) => json!({ "cinder.csi.openstack.org/cluster": c }),
        None => json!({}),
    };
    let answer = cinder
        .send(
            "CreateVolume",
            Method::POST,
            "/volumes",
            Some(&json!({"volume": {"size": 1, "name": name, "metadata": metadata}})),
        )
        .await?;
    let body: Value = serde_json::from_slice(&answer.body)?;
    body["volume"]["id"]
        .as_str()
        .map(str::to_owned)
        .context("volume id")
}

async fn stored_discovery_data(admin: &kube::Client) -> Result<()> {
    let data = json!({"instances": {"imageName": "ubuntu-22-04", "mainNetwork": "stratus-internal",
                                    "sshKeyPairName": "deckhouse"},
                      "podNetworkMode": "DirectRoutingWithPortSecurityEnabled"});
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("d8-provider-cluster-configuration".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        data: Some(
            [(
                "cloud-provider-discovery-data.json".to_string(),
                ByteString(serde_json::to_vec(&data)?),
            )]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

async fn discovery_document(admin: &kube::Client) -> Result<Value> {
    let secret = Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .get("d8-cloud-provider-discovery-data")
        .await?;
    let bytes = secret
        .data
        .and_then(|d| d.get("discovery-data.json").cloned())
        .context("discovery-data.json")?;
    Ok(serde_json::from_slice(&bytes.0)?)
}

fn reconciler(
    discoverer: Arc<dyn Discoverer>,
    me: kube::Client,
    registry: &mut Registry,
    health: &Health,
) -> Reconciler {
    Reconciler::new(
        discoverer,
        Outputs::new(me),
        Arc::new(Metrics::register(registry)),
        health.clone(),
        RetrySettings {
            attempts: 2,
            backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        },
    )
}

#[tokio::test]
async fn openstack_discoverer_on_keystone_and_the_simulators_under_shipped_rbac() -> Result<()> {
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let admin = env.kube_client(Identity::Admin).await?;
    stored_discovery_data(&admin).await?;
    let cloud = OpenStackEnv::start().await?;

    // Two clusters' volumes in one project, and one no CSI driver made.
    let cinder = fixture_client(&cloud, Service::BlockStorage)?;
    volume(&cinder, "pvc-used", Some(CLUSTER)).await?;
    let orphan = volume(&cinder, "pvc-orphan", Some(CLUSTER)).await?;
    volume(&cinder, "pvc-theirs", Some(OTHER)).await?;
    volume(&cinder, "manual", None).await?;
    pv(&admin, "pvc-used", CINDER).await?;
    let nova = fixture_client(&cloud, Service::Compute)?;
    nova.send(
        "CreateServerGroup",
        Method::POST,
        "/os-server-groups",
        Some(&json!({"server_group": {"name": "etcd", "policies": ["anti-affinity"]}})),
    )
    .await?;

    let mut registry = Registry::default();
    let discoverer: Arc<dyn Discoverer> = Arc::new(openstack_backend(
        &lookup(&cloud, &[("CLUSTER_UUID", CLUSTER)]),
        &mut registry,
    )?);
    let health = Health::default();
    let reconciler = reconciler(
        discoverer,
        env.kube_client(ME).await?,
        &mut registry,
        &health,
    );

    // First run: the document, the catalog and the orphan; one login, each list once.
    cloud.reset_request_counts().await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert_eq!(report.writes, 2, "catalog and discovery Secret: {report:?}");
    assert_eq!(report.orphaned_disks, 1, "{report:?}");
    assert!(health.is_ok());
    let counts = cloud.request_counts().await?;
    let expected_calls: BTreeMap<String, u64> = [
        "identity:POST /v3/auth/tokens",
        "compute:GET /flavors/detail",
        "compute:GET /os-availability-zone",
        "compute:GET /os-server-groups",
        "image:GET /images",
        "network:GET /networks",
        "network:GET /security-groups",
        "block-storage:GET /types",
        "block-storage:GET /types/default",
        "block-storage:GET /volumes/detail",
    ]
    .into_iter()
    .map(|k| (k.to_owned(), 1))
    .collect();
    assert_eq!(counts, expected_calls, "one login, each list once");

    let doc = discovery_document(&admin).await?;
    assert_eq!(doc["kind"], "OpenStackCloudProviderDiscoveryData");
    assert_eq!(doc["apiVersion"], "deckhouse.io/v1alpha1");
    assert_eq!(
        doc["flavors"],
        json!(["m1.large", "m1.medium", "m1.small", "m1.tiny", "m1.xlarge"])
    );
    assert_eq!(
        doc["flavorsDetails"][2],
        json!({"name": "m1.small", "ram": 2048, "vcpus": 1, "disk": 20})
    );
    assert_eq!(doc["images"], json!(["ubuntu-22-04"]));
    assert_eq!(doc["imagesDetails"][0]["defaultVolumeType"], "ssd");
    assert_eq!(doc["defaultImageName"], "ubuntu-22-04");
    assert_eq!(doc["mainNetwork"], "stratus-internal");
    assert_eq!(
        doc["additionalNetworks"],
        json!(["public", "stratus-internal"])
    );
    assert_eq!(doc["additionalSecurityGroups"], json!(["default"]));
    assert_eq!(doc["zones"], json!(["nova"]));
    assert_eq!(doc["serverGroups"], json!(["etcd"]));
    assert_eq!(
        doc["podNetworkMode"],
        "DirectRoutingWithPortSecurityEnabled"
    );
    let types: Vec<(&str, bool)> = doc["volumeTypes"]
        .as_array()
        .context("volumeTypes")?
        .iter()
        .map(|t| (t["name"].as_str().unwrap_or(""), t["isDefault"] == true))
        .collect();
    assert_eq!(
        types,
        vec![
            ("__DEFAULT__", true),
            ("multiattach", false),
            ("ssd", false)
        ]
    );

    let catalog = catalog_api(admin.clone())
        .get("for-cluster-autoscaler")
        .await?;
    assert_eq!(
        catalog.data["instanceTypes"][0],
        json!({"name": "m1.large", "cpu": "4", "memory": "8192Mi", "rootDisk": "80Gi"})
    );
    assert_eq!(
        catalog.data["instanceTypes"].as_array().map(Vec::len),
        Some(5)
    );

    let text = metrics_text(&registry);
    assert!(
        text.contains(&format!(
            "cloud_data_discovery_orphaned_disk_info{{id=\"{orphan}\",name=\"pvc-orphan\"}} 1"
        )),
        "{text}"
    );
    assert!(
        !text.contains("pvc-theirs") && !text.contains("manual") && !text.contains("pvc-used"),
        "another cluster's volume is never an orphan:\n{text}"
    );

    // Second run, nothing changed: no Kubernetes write and no second login.
    let writes = env.kube_writes_by(ME.username())?;
    cloud.reset_request_counts().await?;
    let report = reconciler.run_once().await;
    assert_eq!(report.writes, 0, "{report:?}");
    assert_eq!(env.kube_writes_by(ME.username())?, writes);
    let counts = cloud.request_counts().await?;
    assert_eq!(
        counts.get("identity:POST /v3/auth/tokens"),
        None,
        "{counts:?}"
    );
    assert_eq!(
        counts.get("compute:GET /flavors/detail"),
        Some(&1),
        "{counts:?}"
    );

    // Glance answers 503: retried, the step fails, /healthz turns 503; the last document stays.
    cloud
        .set_faults(&[Fault {
            service: Some("image".into()),
            action: None,
            kind: FaultKind::ServerError { status: 503 },
            rate: 1.0,
        }])
        .await?;
    let report = reconciler.run_once().await;
    assert_eq!(report.failed_steps, vec!["discovery_data"], "{report:?}");
    assert!(!health.is_ok());
    assert!(metrics_text(&registry)
        .contains("cloud_data_discovery_cloud_request_error{type=\"discovery_data\"} 1"));
    assert_eq!(
        discovery_document(&admin).await?,
        doc,
        "a failed run keeps the document"
    );
    cloud.set_faults(&[]).await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert!(health.is_ok());

    // Refused credentials: every step fails at once (no retry can help), with a clear error.
    let mut registry = Registry::default();
    let wrong: Arc<dyn Discoverer> = Arc::new(openstack_backend(
        &lookup(
            &cloud,
            &[("OS_PASSWORD", "wrong"), ("CLUSTER_UUID", CLUSTER)],
        ),
        &mut registry,
    )?);
    let err = wrong
        .instance_types()
        .await
        .expect_err("a refused password fails");
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("refused the credentials"), "{err}");
    assert!(
        !err.to_string().contains("wrong"),
        "the password is never shown: {err}"
    );
    let bad_health = Health::default();
    cloud.reset_request_counts().await?;
    let report = reconciler_for(wrong, &env, &mut registry, &bad_health)
        .await?
        .run_once()
        .await;
    assert_eq!(
        report.failed_steps,
        vec!["instance_types", "discovery_data", "disks_meta"],
        "{report:?}"
    );
    assert!(!bad_health.is_ok());
    let logins = cloud.request_counts().await?;
    assert_eq!(
        logins.get("identity:POST /v3/auth/tokens"),
        Some(&3),
        "one refused login per step, none retried: {logins:?}"
    );
    Ok(())
}

async fn reconciler_for(
    discoverer: Arc<dyn Discoverer>,
    env: &TestEnv,
    registry: &mut Registry,
    health: &Health,
) -> Result<Reconciler> {
    Ok(reconciler(
        discoverer,
        env.kube_client(ME).await?,
        registry,
        health,
    ))
}

#[test]
fn missing_openstack_variables_are_named_at_start() {
    let err = openstack_backend(&|_| None, &mut Registry::default())
        .err()
        .expect("no variables, no backend");
    let text = err.to_string();
    assert!(text.contains("--cloud-provider=openstack"), "{text}");
    assert!(text.contains("OS_AUTH_URL is not set"), "{text}");
}
