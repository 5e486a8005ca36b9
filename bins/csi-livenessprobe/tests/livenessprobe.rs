//! csi-livenessprobe end to end: the built binary against a fake CSI driver on a unix socket in
//! a temporary directory, `/healthz` and the metrics over loopback HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use stratus_csi_sidecars::testing::{free_port, http_get, wait_for, FakeDriver, ProbeAnswer};
use tokio::process::{Child, Command};

const DRIVER: &str = "test.csi.stratus.dev";
const BIN: &str = env!("CARGO_BIN_EXE_csi-livenessprobe");
/// Generous: two cores shared with other builds.
const PATIENCE: Duration = Duration::from_secs(20);

struct Probe {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    health: SocketAddr,
    _child: Child,
}

/// Starts the livenessprobe on a loopback port against `<tmp>/csi.sock` (no driver yet).
fn start(extra: &[&str]) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let health: SocketAddr = ([127, 0, 0, 1], free_port().unwrap()).into();
    let child = Command::new(BIN)
        .arg(format!("--csi-address={}", socket.display()))
        .arg(format!("--http-endpoint={health}"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Probe {
        _dir: dir,
        socket,
        health,
        _child: child,
    }
}

impl Probe {
    fn driver(&self) -> FakeDriver {
        FakeDriver::start(&self.socket, DRIVER).unwrap()
    }

    /// Polls `path` until it answers `code`; returns the body.
    async fn answers(&self, path: &str, code: u16) -> String {
        wait_for(&format!("{path} {code}"), PATIENCE, || async {
            match http_get(self.health, path).await {
                Ok((c, body)) if c == code => Some(body),
                _ => None,
            }
        })
        .await
    }
}

#[tokio::test]
async fn healthz_follows_the_drivers_probe() {
    let probe = start(&[]);
    let driver = probe.driver();
    assert_eq!(probe.answers("/healthz", 200).await, "ok");

    driver.answer_probe(ProbeAnswer::NotReady);
    assert_eq!(
        probe.answers("/healthz", 500).await,
        "driver responded but is not ready"
    );

    driver.answer_probe(ProbeAnswer::Unset);
    assert_eq!(
        probe.answers("/healthz", 200).await,
        "ok",
        "an unset ready counts as ready"
    );

    driver.answer_probe(ProbeAnswer::Fail("disk on fire".into()));
    let body = probe.answers("/healthz", 500).await;
    assert!(
        body.contains("Probe on the CSI driver at") && body.contains("Unavailable: disk on fire"),
        "{body}"
    );

    let metrics = probe.answers("/metrics", 200).await;
    for want in [
        r#"driver_name="test.csi.stratus.dev",method_name="/csi.v1.Identity/Probe",grpc_status_code="OK""#,
        r#"grpc_status_code="Unavailable""#,
    ] {
        assert!(metrics.contains(want), "{want} in {metrics}");
    }
}

#[tokio::test]
async fn a_probe_slower_than_the_timeout_fails() {
    let probe = start(&["--probe-timeout=300ms"]);
    let driver = probe.driver();
    probe.answers("/healthz", 200).await;
    driver.answer_probe(ProbeAnswer::Hang);
    let body = probe.answers("/healthz", 500).await;
    assert!(body.contains("within 300ms"), "{body}");
}

#[tokio::test]
async fn healthz_fails_when_the_driver_socket_is_gone() {
    let probe = start(&[]);
    let driver = probe.driver();
    probe.answers("/healthz", 200).await;

    driver.stop().await;
    let body = probe.answers("/healthz", 500).await;
    assert!(
        body.contains("connecting to the CSI driver at")
            && body.contains("No such file or directory"),
        "{body}"
    );

    // The driver restarting is noticed on the next probe.
    let _driver = probe.driver();
    probe.answers("/healthz", 200).await;
}

#[tokio::test]
async fn the_metrics_path_is_a_flag() {
    let probe = start(&["--metrics-path=/custom-metrics"]);
    let _driver = probe.driver();
    probe.answers("/healthz", 200).await;
    let metrics = probe.answers("/custom-metrics", 200).await;
    assert!(
        metrics.contains("csi_sidecar_operations_seconds"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_bad_http_endpoint_is_refused_naming_the_flag() {
    for endpoint in ["$(HOST_IP):9808", "9808", ":port"] {
        let out = Command::new(BIN)
            .arg(format!("--http-endpoint={endpoint}"))
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{endpoint}: {stderr}");
        assert!(stderr.contains("--http-endpoint: "), "{endpoint}: {stderr}");
    }
}

#[tokio::test]
async fn an_endpoint_in_use_is_an_error_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = Command::new(BIN)
        .arg(format!("--http-endpoint={addr}"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--http-endpoint: cannot listen on {addr}")),
        "{stderr}"
    );
}
