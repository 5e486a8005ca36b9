//! The discoverer's built-in secure metrics (`--secure-listen-address`) on a real
//! kube-apiserver, reviewing as the shipped RBAC allows: `/metrics` answers 401 without a token,
//! 403 to a user not allowed to get `deployments/prometheus-metrics` of the Deployment, 200 to
//! one who is; `/healthz` is open and turns 503 after a run whose steps failed.

use std::sync::Arc;

use anyhow::Result;
use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use stratus_discoverer::app::Options;
use stratus_discoverer::metrics::Metrics;
use stratus_discoverer::reconciler::Health;
use stratus_serving::{Readiness, ReviewClients, SecureServer};
use stratus_testenv::core::https::{get, Trust};
use stratus_testenv::{Identity, TestEnv};

mod common;

use common::{install, ME};

const NAMESPACE: &str = "d8-cloud-provider-openstack";

/// Lets `user` get `deployments/prometheus-metrics` of `deployment` (Deckhouse's PodMonitor
/// scraper grant).
async fn grant_metrics(admin: &kube::Client, user: &str, deployment: &str) -> Result<()> {
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NAMESPACE.into()),
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(NAMESPACE.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let role = Role {
        metadata: meta("scrape"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["apps".into()]),
            resources: Some(vec!["deployments/prometheus-metrics".into()]),
            resource_names: Some(vec![deployment.into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &role)
        .await?;
    let binding = RoleBinding {
        metadata: meta("scrape"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "scrape".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

#[tokio::test]
async fn metrics_need_a_token_allowed_to_get_the_deployments_prometheus_metrics() -> Result<()> {
    let env = TestEnv::start().await?;
    install(env.cluster()).await?;
    let admin = env.kube_client(Identity::Admin).await?;
    grant_metrics(
        &admin,
        Identity::Prometheus.username(),
        "cloud-data-discoverer",
    )
    .await?;

    let opts = Options::try_parse_from([
        "cloud-data-discoverer",
        "--cloud-provider=openstack",
        "--secure-listen-address=127.0.0.1:0",
        "--metrics-namespace",
        NAMESPACE,
    ])?;
    let config = opts.secure_serving().expect("secure serving asked for");
    let mut registry = Registry::default();
    let _metrics = Metrics::register(&mut registry);
    let readiness = Readiness::default();
    let health = Health::new(&readiness);
    let me = env.kube_client(ME).await?;
    let server = SecureServer::start(
        config,
        ReviewClients {
            authentication: me.clone(),
            authorization: me,
        },
        Arc::new(registry),
        readiness,
    )
    .await?;
    let addr = server.local_addr();

    let anonymous = get(addr, "/metrics", None, &Trust::Any).await?;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let nobody = get(
        addr,
        "/metrics",
        Some(env.token(Identity::Nobody)),
        &Trust::Any,
    )
    .await?;
    assert_eq!(nobody.status, 403, "{}", nobody.body);
    assert!(nobody.body.contains("Forbidden"), "{}", nobody.body);
    let scraper = get(
        addr,
        "/metrics",
        Some(env.token(Identity::Prometheus)),
        &Trust::Any,
    )
    .await?;
    assert_eq!(scraper.status, 200, "{}", scraper.body);
    assert!(
        scraper
            .body
            .contains("cloud_data_discovery_update_resource_error"),
        "{}",
        scraper.body
    );

    // /healthz: open; 503 after a run whose steps failed, 200 after a good one.
    let healthy = get(addr, "/healthz", None, &Trust::Any).await?;
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "ok"));
    health.record(&["discovery_data"]);
    let failing = get(addr, "/healthz", None, &Trust::Any).await?;
    assert_eq!(failing.status, 503, "{}", failing.body);
    assert!(failing.body.contains("discovery_data"), "{}", failing.body);
    health.record(&[]);
    assert_eq!(get(addr, "/healthz", None, &Trust::Any).await?.status, 200);
    server.shutdown(std::time::Duration::from_secs(1)).await;
    Ok(())
}
