//! Smoke test of the real test environment: kube access per identity (RBAC on), the audit-log
//! write counter, the counting AWS proxy in front of moto, and an apiserver restart.

use tokio::time::Instant;

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use stratus_testenv::{Identity, TestEnv};

#[tokio::test]
async fn smoke() -> Result<()> {
    let started = Instant::now();
    let mut env = TestEnv::start().await?;
    eprintln!(
        "TestEnv::start took {:.2}s (dir {})",
        started.elapsed().as_secs_f64(),
        env.dir().display()
    );

    // Admin can list namespaces; the apiserver created the system ones.
    let admin = env.kube_client(Identity::Admin).await?;
    let namespaces = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await?;
    let names: Vec<String> = namespaces
        .items
        .iter()
        .filter_map(|ns| ns.metadata.name.clone())
        .collect();
    assert!(names.contains(&"default".to_owned()), "{names:?}");
    assert!(names.contains(&"kube-system".to_owned()), "{names:?}");

    // RBAC is on: the cloud-controller-manager identity has no bindings yet.
    let ccm = env.kube_client(Identity::CloudControllerManager).await?;
    match Api::<Secret>::namespaced(ccm, "kube-system")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("expected 403 Forbidden listing secrets as the CCM, got {other:?}"),
    }

    // AWS query-protocol call through the counting proxy.
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::post(env.aws_endpoint())
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ec2/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, Signature=0000",
        )
        .header(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )
        .header("x-amz-date", "20260101T000000Z")
        .body(Full::new(Bytes::from_static(
            b"Action=DescribeRegions&Version=2016-11-15",
        )))?;
    let response = client.request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(status.is_success(), "{status}: {body}");
    assert!(body.contains("us-east-1"), "{body}");
    let counts = env.aws_request_counts().await?;
    assert_eq!(counts.get("ec2:DescribeRegions"), Some(&1), "{counts:?}");
    env.reset_aws_request_counts().await?;
    assert!(env.aws_request_counts().await?.is_empty());

    // Writes are counted per user from the audit log.
    let admin_user = Identity::Admin.username();
    let before = env.kube_writes_by(admin_user)?;
    let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), "default");
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("smoke".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps
        .create(&PostParams::default(), &config_map)
        .await?;
    assert_eq!(env.kube_writes_by(admin_user)? - before, 1);
    assert_eq!(
        env.kube_writes_by(Identity::CloudControllerManager.username())?,
        0
    );

    // The apiserver comes back on the same URL with the same data.
    let started = Instant::now();
    env.restart_apiserver().await?;
    eprintln!(
        "restart_apiserver took {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let admin = env.kube_client(Identity::Admin).await?;
    Api::<ConfigMap>::namespaced(admin, "default")
        .get("smoke")
        .await
        .context("config map after apiserver restart")?;

    let dir = env.dir().to_path_buf();
    let started = Instant::now();
    drop(env);
    eprintln!(
        "dropping the env took {:.2}s",
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("STRATUS_KEEP_ENV").is_none_or(|v| v != "1") {
        assert!(!dir.exists(), "{} should be removed on drop", dir.display());
    }
    Ok(())
}
