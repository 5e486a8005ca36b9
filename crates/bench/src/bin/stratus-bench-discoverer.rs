//! `make bench-discoverer`: the shipped binary against moto with VOLUMES EBS volumes (half this
//! cluster's, half of them without a PersistentVolume) and moto's whole instance-type catalog;
//! with `--cloud openstack`, against Keystone and the simulators with FLAVORS more flavors,
//! IMAGES more images and VOLUMES Cinder volumes (the same split); prints JSON: the cloud's size,
//! cloud requests of the first run, its seconds, the process's peak RSS.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_ec2::config::{Credentials, Region};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use stratus_testenv::{Identity, TestEnv};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

/// The process's resident memory now, split as the kernel counts it: heap and stacks
/// (`RssAnon`) versus pages of the binary and libraries (`RssFile`), in MiB.
fn rss_split(pid: u32) -> serde_json::Value {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| (kb / 1024.0 * 10.0).round() / 10.0)
    };
    serde_json::json!({"anon": field("RssAnon:"), "file": field("RssFile:")})
}

/// Polls the plain `/metrics` until the first run is done; returns the text.
async fn first_run_metrics(port: u16, started: tokio::time::Instant) -> Result<String> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let deadline = started + Duration::from_secs(300);
    loop {
        let done = Command::new("curl")
            .args(["-sf", &url])
            .output()
            .ok()
            .and_then(|o| {
                let t = String::from_utf8_lossy(&o.stdout).into_owned();
                t.contains("cloud_data_discovery_runs_total{result=")
                    .then_some(t)
            });
        if let Some(t) = done {
            return Ok(t);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the first run did not finish in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn openstack(binary: &str, volumes: usize) -> Result<()> {
    use stratus_openstack_api::client::{guard, Service, ServiceClient, Session};
    let flavors: usize = arg("--flavors", "500").parse()?;
    let images: usize = arg("--images", "200").parse()?;
    let env = TestEnv::start().await?;
    install_catalog_crd(&env).await?;
    let cloud = stratus_testenv::OpenStackEnv::start().await?;
    let sim = cloud.sim().context("the in-process simulator")?;
    sim.add_flavors("bench", flavors);
    sim.add_images("bench", images);
    let vars: Vec<(String, String)> = cloud.env_vars();
    let lookup = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let settings =
        stratus_discoverer::openstack::env::settings(&lookup).map_err(anyhow::Error::msg)?;
    let metrics = std::sync::Arc::new(stratus_cloud_kit::ApiMetrics::register(
        &mut prometheus_client::registry::Registry::default(),
    ));
    let session = std::sync::Arc::new(Session::new(
        stratus_openstack_api::client::http::HttpClient::new(
            &Default::default(),
            Duration::from_secs(30),
        )?,
        &settings.auth_url,
        settings.credentials,
        Default::default(),
        Some(settings.region),
        guard("identity", &metrics),
    ));
    let cinder = ServiceClient::new(
        session,
        Service::BlockStorage,
        guard("block-storage", &metrics),
        Vec::new(),
    );
    let pvs = Api::<PersistentVolume>::all(env.kube_client(Identity::Admin).await?);
    for i in 0..volumes {
        let cluster = if i % 2 == 0 { "bench" } else { "other" };
        let body = serde_json::json!({"volume": {"size": 1, "name": format!("pvc-{i}"),
            "metadata": {"cinder.csi.openstack.org/cluster": cluster}}});
        cinder
            .send("CreateVolume", http::Method::POST, "/volumes", Some(&body))
            .await?;
        if i % 4 == 0 {
            pvs.create(
                &PostParams::default(),
                &pv(&format!("pvc-{i}"), "cinder.csi.openstack.org")?,
            )
            .await?;
        }
    }
    let port = free_port()?;
    cloud.reset_request_counts().await?;
    let started = tokio::time::Instant::now();
    let mut child = Command::new(binary)
        .args(["--cloud-provider=openstack", "--discovery-period=1h"])
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig(Identity::Admin))
        .envs(vars.iter().cloned())
        .env("CLUSTER_UUID", "bench")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {binary}"))?;
    let pid = child.id();
    let text = first_run_metrics(port, started).await;
    let seconds = started.elapsed().as_secs_f64();
    let rss = peak_rss(pid);
    let rss_at_end = rss_split(pid);
    let _ = child.kill();
    let _ = child.wait();
    let text = text?;
    let counts = cloud.request_counts().await?;
    let orphans = text
        .lines()
        .filter(|l| l.starts_with("cloud_data_discovery_orphaned_disk_info{"))
        .count();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "benchmark": "cloud-data-discoverer (openstack, Keystone + simulators)",
            "binary": binary,
            "flavors": flavors + 5,
            "images": images + 1,
            "volumes": volumes,
            "this_cluster_volumes": volumes.div_ceil(2),
            "orphaned_disks_reported": orphans,
            "cloud_requests_first_run": counts,
            "cloud_requests_total": counts.values().sum::<u64>(),
            "first_run_seconds_incl_startup": seconds,
            "peak_rss_bytes": rss,
            "peak_rss_mib": rss.map(|b| b as f64 / 1048576.0),
            "rss_at_end_mib": rss_at_end,
        }))?
    );
    Ok(())
}

fn pv(name: &str, driver: &str) -> Result<PersistentVolume> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": driver, "volumeHandle": name}}
    }))?)
}

async fn install_catalog_crd(env: &TestEnv) -> Result<()> {
    let admin = env.kube_client(Identity::Admin).await?;
    let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(
        stratus_testenv::repo_root()
            .join("deploy/cloud-data-discoverer/instancetypescatalogs.crd.yaml"),
    )?)?;
    Api::<CustomResourceDefinition>::all(admin)
        .create(&PostParams::default(), &crd)
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let binary = arg("--binary", "target/release/cloud-data-discoverer");
    let volumes: usize = arg("--volumes", "1000").parse()?;
    if arg("--cloud", "aws") == "openstack" {
        return openstack(&binary, volumes).await;
    }
    let env = TestEnv::start().await?;
    install_catalog_crd(&env).await?;
    let admin = env.kube_client(Identity::Admin).await?;

    let ec2 = aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(env.moto_endpoint())
            .credentials_provider(Credentials::new("testing", "testing", None, None, "bench"))
            .build(),
    );
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    for i in 0..volumes {
        let cluster = if i % 2 == 0 { "bench" } else { "other" };
        ec2.create_volume()
            .availability_zone("us-east-1a")
            .size(1)
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Volume)
                    .tags(
                        Tag::builder()
                            .key("ebs.csi.aws.com/cluster")
                            .value("true")
                            .build(),
                    )
                    .tags(
                        Tag::builder()
                            .key(format!("kubernetes.io/cluster/{cluster}"))
                            .value("owned")
                            .build(),
                    )
                    .tags(
                        Tag::builder()
                            .key("CSIVolumeName")
                            .value(format!("pvc-{i}"))
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await?;
        if i % 4 == 0 {
            pvs.create(
                &PostParams::default(),
                &pv(&format!("pvc-{i}"), "ebs.csi.aws.com")?,
            )
            .await?;
        }
    }
    let port = free_port()?;
    env.reset_aws_request_counts().await?;
    let started = tokio::time::Instant::now();
    let mut child = Command::new(&binary)
        .args([
            "--cloud-provider=aws",
            "--discovery-period=1h",
            "--cluster-id=bench",
        ])
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .envs(env.env_vars(Identity::Admin))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {binary}"))?;
    let pid = child.id();
    let text = first_run_metrics(port, started).await?;
    let seconds = started.elapsed().as_secs_f64();
    let rss = peak_rss(pid);
    let rss_at_end = rss_split(pid);
    let counts = env.aws_request_counts().await?;
    let _ = child.kill();
    let _ = child.wait();
    let orphans = text
        .lines()
        .filter(|l| l.starts_with("cloud_data_discovery_orphaned_disk_info{"))
        .count();
    let types = counts
        .get("ec2:DescribeInstanceTypes")
        .copied()
        .unwrap_or(0);
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "benchmark": "cloud-data-discoverer (aws, moto)",
            "binary": binary,
            "volumes": volumes,
            "this_cluster_volumes": volumes.div_ceil(2),
            "orphaned_disks_reported": orphans,
            "cloud_requests_first_run": counts,
            "describe_instance_types_pages": types,
            "first_run_seconds_incl_startup": seconds,
            "peak_rss_bytes": rss,
            "peak_rss_mib": rss.map(|b| b as f64 / 1048576.0),
            "rss_at_end_mib": rss_at_end,
        }))?
    );
    Ok(())
}
