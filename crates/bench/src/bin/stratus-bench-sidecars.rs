//! `make bench-sidecars`: the release csi-node-driver-registrar and csi-livenessprobe against a
//! fake CSI driver on a unix socket, as the kubelet uses them: the registrar is registered over
//! its socket (GetInfo, NotifyRegistrationStatus) and both answer PROBES requests,
//! CONCURRENCY at a time: `/healthz` (the livenessprobe asks the driver's Identity.Probe for
//! each), one in ten a `/metrics` scrape for the livenessprobe (the registrar has no metrics); prints JSON: seconds and peak RSS per sidecar, which the CSI
//! charts' memory requests and limits follow.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use stratus_csi_sidecars::testing::{free_port, http_get, FakeDriver};
use stratus_kubelet_plugin_spec::v1::registration_client::RegistrationClient;
use stratus_kubelet_plugin_spec::v1::{InfoRequest, RegistrationStatus};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The fake driver's name.
const DRIVER: &str = "bench.csi.stratus.dev";
/// How long a sidecar may take to come up.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Measures the CSI sidecars' time and memory under the kubelet's probes.
#[derive(Parser, Debug)]
struct Args {
    /// The csi-node-driver-registrar binary.
    #[arg(long)]
    registrar: std::path::PathBuf,
    /// The csi-livenessprobe binary.
    #[arg(long)]
    livenessprobe: std::path::PathBuf,
    /// `/healthz` requests per sidecar.
    #[arg(long, default_value_t = 2000)]
    probes: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("csi.sock");
    let registration = dir.path().join("registration");
    std::fs::create_dir_all(&registration)?;
    std::fs::create_dir_all(dir.path().join("kubelet"))?;
    let driver = FakeDriver::start(&socket, DRIVER)?;

    let registrar_http = loopback()?;
    let registrar = spawn(
        &args.registrar,
        &[
            format!("--csi-address={}", socket.display()),
            format!(
                "--kubelet-registration-path={}",
                dir.path().join("kubelet/csi.sock").display()
            ),
            format!("--plugin-registration-path={}", registration.display()),
            format!("--http-endpoint={registrar_http}"),
        ],
    )?;
    let registration_socket = registration.join(format!("{DRIVER}-reg.sock"));
    until("the registration socket", || async {
        registration_socket.exists()
    })
    .await?;
    register(&registration_socket).await?;
    let registrar_result = load(&registrar, registrar_http, false, &args).await?;

    let probe_http = loopback()?;
    let livenessprobe = spawn(
        &args.livenessprobe,
        &[
            format!("--csi-address={}", socket.display()),
            format!("--http-endpoint={probe_http}"),
        ],
    )?;
    let probe_result = load(&livenessprobe, probe_http, true, &args).await?;

    stop(registrar).await?;
    stop(livenessprobe).await?;
    driver.stop().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "probes": args.probes,
            "livenessprobe_metrics_scrapes": args.probes / 10,
            "concurrency": args.concurrency,
            "csi-node-driver-registrar": registrar_result,
            "csi-livenessprobe": probe_result,
        }))?
    );
    Ok(())
}

/// A free loopback address.
fn loopback() -> Result<SocketAddr> {
    Ok(([127, 0, 0, 1], free_port()?).into())
}

fn spawn(binary: &Path, args: &[String]) -> Result<Child> {
    Command::new(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

/// Polls `check` every 20 ms until it holds, for at most [`START_DEADLINE`].
async fn until<F, Fut>(what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + START_DEADLINE;
    while !check().await {
        if Instant::now() > deadline {
            bail!("{what}: not there after {START_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Plays the kubelet: GetInfo, then a successful NotifyRegistrationStatus.
async fn register(socket: &Path) -> Result<()> {
    let channel = stratus_csi_sidecars::unix::channel(socket)
        .await
        .map_err(|e| anyhow::anyhow!("connecting to the registration socket: {e}"))?;
    let mut kubelet = RegistrationClient::new(channel);
    let info = kubelet.get_info(InfoRequest {}).await?.into_inner();
    if info.name != DRIVER {
        bail!("GetInfo named {:?}, not {DRIVER}", info.name);
    }
    kubelet
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await?;
    Ok(())
}

/// Waits for `/healthz` to answer 200, then sends the probes (one in ten a `/metrics` scrape when
/// `metrics`); the seconds and the process's peak RSS.
async fn load(
    child: &Child,
    addr: SocketAddr,
    metrics: bool,
    args: &Args,
) -> Result<serde_json::Value> {
    until("/healthz 200", || async {
        matches!(http_get(addr, "/healthz").await, Ok((200, _)))
    })
    .await?;
    let started = Instant::now();
    let paths: Vec<&str> = (0..args.probes)
        .map(|i| {
            if metrics && i % 10 == 9 {
                "/metrics"
            } else {
                "/healthz"
            }
        })
        .collect();
    for batch in paths.chunks(args.concurrency.max(1)) {
        let answers =
            futures::future::join_all(batch.iter().map(|path| http_get(addr, path))).await;
        for (path, answer) in batch.iter().zip(answers) {
            match answer {
                Ok((200, _)) => {}
                Ok((code, body)) => bail!("{path} answered {code}: {body}"),
                Err(e) => bail!("{path}: {e}"),
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let pid = child.id().context("the sidecar exited")?;
    let peak_kib = peak_rss_kib(pid).context("no VmHWM")?;
    Ok(serde_json::json!({
        "seconds": (seconds * 100.0).round() / 100.0,
        "peak_rss_mib": (peak_kib as f64 / 1024.0 * 10.0).round() / 10.0,
    }))
}

/// VmHWM of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// SIGTERM, then the exit within [`START_DEADLINE`]; a sidecar must stop cleanly.
async fn stop(mut child: Child) -> Result<()> {
    let pid = child.id().context("the sidecar exited early")?;
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await?;
    if !sent.success() {
        bail!("kill -TERM {pid}: {sent}");
    }
    let status = tokio::time::timeout(START_DEADLINE, child.wait())
        .await
        .context("the sidecar did not stop after SIGTERM")??;
    if !status.success() {
        bail!("the sidecar exited with {status} after SIGTERM");
    }
    Ok(())
}
