//! The upstream aws-ebs-csi-driver flags beyond the core ones, on the real binary and moto:
//! metrics over HTTPS with the given certificate files, `--extra-volume-tags` merged under
//! `--extra-tags`, `--warn-on-invalid-tag` leaving an unusable tag out instead of failing,
//! `--aws-sdk-debug-log` showing the SDK's request log, `--batching=false` giving each lookup its
//! own describe (counted at the proxy against the batched default), and the values that cannot
//! be honoured refused by name with the reason.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use anyhow::{ensure, Context, Result};
use common::{connect, driver_log, ZONE};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::controller_client::ControllerClient;
use stratus_scenarios::csi::contract::create_request;
use stratus_scenarios::csi::driver;
use stratus_testenv::core::https::{self, Trust};
use stratus_testenv::AwsEnv;
use tokio::process::{Child, Command};

/// Concurrent lookups per batching mode.
const CREATES: usize = 6;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

async fn controller(
    env: &AwsEnv,
    dir: &Path,
    flags: &[String],
) -> Result<(Child, ControllerClient<tonic::transport::Channel>)> {
    let mut args = vec![
        "controller".to_string(),
        format!("--endpoint=unix://{}", driver::socket(dir).display()),
    ];
    args.extend(flags.iter().cloned());
    let (child, socket) = driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &args,
        &env.env_vars(),
    )
    .await?;
    Ok((child, ControllerClient::new(connect(&socket).await?)))
}

fn request(name: &str, parameters: &[(&str, &str)]) -> csi::CreateVolumeRequest {
    create_request(
        name,
        "",
        parameters,
        Some((stratus_csi_ebs::TOPOLOGY_KEY, ZONE)),
    )
}

/// The tags of volume `id` in moto.
async fn tags(ec2: &aws_sdk_ec2::Client, id: &str) -> Result<BTreeMap<String, String>> {
    let out = ec2.describe_volumes().volume_ids(id).send().await?;
    Ok(out
        .volumes()
        .iter()
        .flat_map(|v| v.tags())
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect())
}

/// Creates [`CREATES`] volumes, then looks them all up at once (ValidateVolumeCapabilities);
/// the DescribeVolumes calls the lookups cost.
async fn describes_for_concurrent_lookups(
    env: &AwsEnv,
    client: &ControllerClient<tonic::transport::Channel>,
    prefix: &str,
) -> Result<u64> {
    let mut ids = Vec::new();
    for i in 0..CREATES {
        let created = client
            .clone()
            .create_volume(request(&format!("{prefix}-{i}"), &[]))
            .await?
            .into_inner()
            .volume
            .context("no volume")?;
        ids.push(created.volume_id);
    }
    env.reset_aws_request_counts().await?;
    let lookups = ids.iter().map(|id| {
        let mut c = client.clone();
        let mut req = request("unused", &[]);
        let check = csi::ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: std::mem::take(&mut req.volume_capabilities),
            ..Default::default()
        };
        async move { c.validate_volume_capabilities(check).await }
    });
    for r in futures::future::join_all(lookups).await {
        r.context("a concurrent ValidateVolumeCapabilities")?;
    }
    let counts = env.aws_request_counts().await?;
    Ok(counts.get("ec2:DescribeVolumes").copied().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_controller_flags_work_on_moto() -> Result<()> {
    let env = AwsEnv::start().await?;
    let ec2 = stratus_scenarios::ec2_fixture::client(env.moto_endpoint()).await;
    let tmp = tempfile::tempdir()?;
    let (cert, key) = stratus_serving_files(tmp.path())?;
    let port = free_port();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let flags: Vec<String> = [
        format!("--http-endpoint=127.0.0.1:{port}"),
        format!("--metrics-cert-file={}", cert.display()),
        format!("--metrics-key-file={}", key.display()),
        "--extra-volume-tags=team=storage,env=old".into(),
        "--extra-tags=env=dev".into(),
        "--warn-on-invalid-tag".into(),
        "--aws-sdk-debug-log=true".into(),
        "--user-agent-extra=stratus-test".into(),
        "--modify-volume-request-handler-timeout=3s".into(),
        "--deprecated-metrics=false".into(),
        "--logtostderr".into(),
        "--enable-otel-tracing=false".into(),
    ]
    .into();
    let dir = tmp.path().join("tls-run");
    std::fs::create_dir_all(&dir)?;
    let (mut child, mut client) = controller(&env, &dir, &flags).await?;
    let log = || driver_log(&dir);

    // Metrics over HTTPS with the given certificate.
    let answer = https::get(address, "/metrics", None, &Trust::Any)
        .await
        .with_context(|| format!("GET https /metrics; log:\n{}", log()))?;
    ensure!(answer.status == 200, "metrics answered {}", answer.status);
    let served = rustls_pem_first(&std::fs::read(&cert)?)?;
    ensure!(
        answer.server_cert.as_ref() == served.as_slice(),
        "the metrics endpoint did not present --metrics-cert-file"
    );
    ensure!(
        https::get(address, "/healthz", None, &Trust::Any)
            .await?
            .status
            == 200
    );

    // Tags: the deprecated spelling under --extra-tags; an unusable tag left out with a warning.
    let volume = client
        .create_volume(request(
            "tagged",
            &[
                ("tagSpecification_1", "aws:owner=me"),
                ("tagSpecification_2", "app={{ .PVCName }}"),
            ],
        ))
        .await
        .with_context(|| format!("CreateVolume; log:\n{}", log()))?
        .into_inner()
        .volume
        .context("no volume")?;
    let have = tags(&ec2, &volume.volume_id).await?;
    ensure!(
        have.get("team").map(String::as_str) == Some("storage"),
        "{have:?}"
    );
    ensure!(
        have.get("env").map(String::as_str) == Some("dev"),
        "{have:?}"
    );
    ensure!(
        have.contains_key("app") && !have.contains_key("aws:owner"),
        "{have:?}"
    );
    let text = log();
    ensure!(
        text.contains("--warn-on-invalid-tag"),
        "no warning for the left-out tag:\n{text}"
    );
    ensure!(text.contains("--extra-volume-tags is deprecated"), "{text}");
    // The SDK's own request log, whatever --v says (the default, 0).
    ensure!(
        text.contains("aws_smithy_runtime"),
        "no SDK debug log:\n{text}"
    );
    ensure!(
        !text.contains("aws_sigv4"),
        "the signer's log must stay quiet:\n{text}"
    );

    // Batched (default) against --batching=false: one describe per lookup.
    let batched = describes_for_concurrent_lookups(&env, &client, "batched").await?;
    ensure!(
        batched <= 2,
        "batched lookups cost {batched} DescribeVolumes"
    );
    child.kill().await?;
    let dir = tmp.path().join("unbatched-run");
    std::fs::create_dir_all(&dir)?;
    let (_child, client) = controller(&env, &dir, &["--batching=false".to_string()]).await?;
    let unbatched = describes_for_concurrent_lookups(&env, &client, "unbatched").await?;
    ensure!(
        unbatched >= batched + (CREATES as u64) - 1,
        "--batching=false cost {unbatched} DescribeVolumes for {CREATES} concurrent lookups, batched {batched}"
    );
    Ok(())
}

/// A self-signed certificate and key written as PEM files in `dir`.
fn stratus_serving_files(dir: &Path) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    stratus_serving::self_signed::load_or_generate(
        &dir.join("metrics-tls"),
        &["127.0.0.1".to_string(), "localhost".to_string()],
    )
}

/// The DER of the first certificate of a PEM file.
fn rustls_pem_first(pem: &[u8]) -> Result<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    let cert = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .next()
        .context("no certificate in the PEM file")??;
    Ok(cert.as_ref().to_vec())
}

#[tokio::test]
async fn values_that_cannot_be_honoured_are_refused_by_name() -> Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_ebs-csi-driver"))
        .args([
            "node",
            "--endpoint=unix:///nonexistent/csi.sock",
            "--node-id=i-0123456789abcdef0",
            "--availability-zone=us-east-1a",
            "--enable-otel-tracing",
            "--logtostderr=false",
            "--windows-host-process",
            "--volume-attach-limit=5",
            "--reserved-volume-attachments=2",
            "--metrics-key-file=/nonexistent/key.pem",
            "--user-agent-extra=has space",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(driver::STARTUP_DEADLINE, out)
        .await
        .context("the driver did not exit")??;
    ensure!(!out.status.success(), "the driver started");
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "--enable-otel-tracing=true",
        "--logtostderr=false",
        "--windows-host-process=true",
        "only one of --volume-attach-limit and --reserved-volume-attachments",
        "--metrics-cert-file/--metrics-key-file need --http-endpoint",
        "--user-agent-extra",
    ] {
        ensure!(err.contains(want), "{want:?} not named:\n{err}");
    }
    Ok(())
}

/// The node plugin's Node object as the identity source (`--metadata-sources`' default order,
/// the instance metadata switched off as `AWS_EC2_METADATA_DISABLED` does): the instance from the
/// providerID, the zone from the label, read as the chart's node ServiceAccount under the chart's
/// RBAC (`KUBECONFIG` standing for the pod's account).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_finds_its_identity_in_its_node_object() -> Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, PostParams};
    use stratus_scenarios::csi::contract::node_info;
    use stratus_scenarios::csi::harness::{chart_account, Chart};

    let env = stratus_testenv::TestEnv::start().await?;
    let tmp = tempfile::tempdir()?;
    let chart = Chart {
        service_account: "ebs-csi-node-sa",
        ..stratus_scenarios::csi::harness::EBS_CHART
    };
    let account = chart_account(env.cluster(), &chart, tmp.path()).await?;
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ip-10-0-3-7.ec2.internal",
                     "labels": {"topology.kubernetes.io/zone": "us-east-1c"}},
        "spec": {"providerID": "aws:///us-east-1c/i-0fedcba9876543210"}}))?;
    Api::<Node>::all(account.admin.clone())
        .create(&PostParams::default(), &node)
        .await?;
    let dir = tmp.path().join("node");
    std::fs::create_dir_all(&dir)?;
    let (_node, socket) = driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        &dir,
        &[
            "node".into(),
            format!("--endpoint=unix://{}", driver::socket(&dir).display()),
        ],
        &[
            ("CSI_NODE_NAME".into(), "ip-10-0-3-7.ec2.internal".into()),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
            (
                "KUBECONFIG".into(),
                account.kubeconfig.display().to_string(),
            ),
        ],
    )
    .await?;
    let (node_id, segments) = node_info(&socket)
        .await
        .with_context(|| driver::log_tail(&dir))?;
    ensure!(
        node_id == "i-0fedcba9876543210",
        "NodeGetInfo answered {node_id:?}"
    );
    ensure!(
        segments
            .get(stratus_csi_ebs::TOPOLOGY_KEY)
            .map(String::as_str)
            == Some("us-east-1c"),
        "{segments:?}"
    );
    // Only the kubernetes source, and a Node that is not there: the start fails naming it.
    let out = Command::new(env!("CARGO_BIN_EXE_ebs-csi-driver"))
        .args([
            "node",
            "--endpoint=unix:///nonexistent/csi.sock",
            "--metadata-sources=kubernetes",
        ])
        .env("CSI_NODE_NAME", "ip-10-0-9-9.ec2.internal")
        .env("KUBECONFIG", &account.kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(driver::STARTUP_DEADLINE, out)
        .await
        .context("the node plugin without an identity did not exit")??;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "started without an identity");
    ensure!(
        err.contains("kubernetes: reading Node ip-10-0-9-9.ec2.internal"),
        "{err}"
    );
    Ok(())
}
