//! csi-node-driver-registrar end to end: the built binary against a fake CSI driver on a unix
//! socket in a temporary directory, the kubelet played by a plugin-registration client, health
//! checks over loopback HTTP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use stratus_csi_sidecars::testing::{free_port, http_get, wait_for, FakeDriver};
use stratus_kubelet_plugin_spec::v1::registration_client::RegistrationClient;
use stratus_kubelet_plugin_spec::v1::{InfoRequest, RegistrationStatus};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const DRIVER: &str = "test.csi.stratus.dev";
const BIN: &str = env!("CARGO_BIN_EXE_csi-node-driver-registrar");
/// Generous: two cores shared with other builds.
const PATIENCE: Duration = Duration::from_secs(20);

/// A temporary node: the driver's socket, the kubelet's registration directory and the kubelet's
/// view of the driver's socket, all under one directory.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("registration")).unwrap();
        std::fs::create_dir(dir.path().join("kubelet")).unwrap();
        Node { dir }
    }
    fn driver_socket(&self) -> PathBuf {
        self.dir.path().join("csi.sock")
    }
    fn registration_dir(&self) -> PathBuf {
        self.dir.path().join("registration")
    }
    fn registration_socket(&self) -> PathBuf {
        self.registration_dir().join(format!("{DRIVER}-reg.sock"))
    }
    fn kubelet_path(&self) -> PathBuf {
        self.dir.path().join("kubelet/csi.sock")
    }
    fn start_driver(&self) -> FakeDriver {
        FakeDriver::start(&self.driver_socket(), DRIVER).unwrap()
    }
    fn args(&self) -> Vec<String> {
        vec![
            "--v=5".into(),
            format!("--csi-address={}", self.driver_socket().display()),
            format!(
                "--kubelet-registration-path={}",
                self.kubelet_path().display()
            ),
            format!(
                "--plugin-registration-path={}",
                self.registration_dir().display()
            ),
        ]
    }
    /// Starts the registrar with `/healthz` on a loopback port.
    fn start_registrar(&self) -> (Child, SocketAddr) {
        let health: SocketAddr = ([127, 0, 0, 1], free_port().unwrap()).into();
        let child = Command::new(BIN)
            .args(self.args())
            .arg(format!("--http-endpoint={health}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        (child, health)
    }
    async fn wait_for_registration_socket(&self) {
        let socket = self.registration_socket();
        wait_for("the registration socket", PATIENCE, || async {
            socket.exists().then_some(())
        })
        .await;
    }
}

async fn kubelet(socket: &Path) -> RegistrationClient<tonic::transport::Channel> {
    RegistrationClient::new(stratus_csi_sidecars::unix::channel(socket).await.unwrap())
}

async fn healthz_is(addr: SocketAddr, code: u16) -> String {
    wait_for(&format!("/healthz {code}"), PATIENCE, || async {
        match http_get(addr, "/healthz").await {
            Ok((c, body)) if c == code => Some(body),
            _ => None,
        }
    })
    .await
}

async fn exit_of(child: Child) -> (std::process::ExitStatus, String) {
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("the registrar exits")
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sigterm(child: &Child) {
    let pid = child.id().expect("the registrar is running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs `--mode=kubelet-registration-probe` and says whether it passed.
async fn probe_mode_passes(node: &Node) -> bool {
    Command::new(BIN)
        .args(node.args())
        .arg("--mode=kubelet-registration-probe")
        .stderr(Stdio::null())
        .status()
        .await
        .unwrap()
        .success()
}

#[tokio::test]
async fn registers_the_driver_with_the_kubelet() {
    let node = Node::new();
    let _driver = node.start_driver();
    let (registrar, health) = node.start_registrar();
    node.wait_for_registration_socket().await;

    let mut kubelet = kubelet(&node.registration_socket()).await;
    let info = kubelet.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, node.kubelet_path().to_string_lossy());
    assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);
    // Not reported yet counts as healthy; the probe mode waits for the kubelet's word.
    assert_eq!(healthz_is(health, 200).await, "ok");
    assert!(!probe_mode_passes(&node).await);

    kubelet
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(healthz_is(health, 200).await, "ok");
    wait_for("the registration probe file", PATIENCE, || async {
        node.dir
            .path()
            .join("kubelet/registration")
            .exists()
            .then_some(())
    })
    .await;
    assert!(probe_mode_passes(&node).await);
    drop(registrar);
}

#[tokio::test]
async fn a_refused_registration_ends_the_process_non_zero() {
    let node = Node::new();
    let _driver = node.start_driver();
    let (registrar, _health) = node.start_registrar();
    node.wait_for_registration_socket().await;

    let mut kubelet = kubelet(&node.registration_socket()).await;
    // The process may end before or after the answer reaches us; either is upstream behaviour.
    let _ = kubelet
        .notify_registration_status(RegistrationStatus {
            plugin_registered: false,
            error: "boom".into(),
        })
        .await;
    let (status, stderr) = exit_of(registrar).await;
    assert!(!status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("the kubelet refused the registration") && stderr.contains("boom"),
        "{stderr}"
    );
}

#[tokio::test]
async fn sigterm_removes_the_registration_socket() {
    let node = Node::new();
    let _driver = node.start_driver();
    // A stale socket from a killed container is replaced.
    drop(std::os::unix::net::UnixListener::bind(node.registration_socket()).unwrap());
    let (registrar, health) = node.start_registrar();
    healthz_is(health, 200).await;

    sigterm(&registrar);
    let (status, stderr) = exit_of(registrar).await;
    assert!(status.success(), "{status}: {stderr}");
    assert!(!node.registration_socket().exists());
}

#[tokio::test]
async fn healthz_fails_when_the_registration_socket_vanishes() {
    let node = Node::new();
    let _driver = node.start_driver();
    let (_registrar, health) = node.start_registrar();
    healthz_is(health, 200).await;

    std::fs::remove_file(node.registration_socket()).unwrap();
    assert_eq!(
        healthz_is(health, 500).await,
        "registration socket does not exist"
    );
}

#[tokio::test]
async fn a_missing_kubelet_registration_path_is_named() {
    let out = Command::new(BIN)
        .arg("--csi-address=/nonexistent/csi.sock")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--kubelet-registration-path"), "{stderr}");
}

#[tokio::test]
async fn an_absent_driver_is_an_error_after_the_timeout() {
    let node = Node::new();
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(node.args())
        .arg("--timeout=700ms")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(700));
    let want = format!(
        "no answer from the CSI driver at {} within 700ms",
        node.driver_socket().display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(
        stderr.contains("No such file or directory"),
        "the last cause is named: {stderr}"
    );
    assert!(!node.registration_socket().exists());
}

#[tokio::test]
async fn a_bad_http_endpoint_is_named() {
    let node = Node::new();
    let out = Command::new(BIN)
        .args(node.args())
        .arg("--http-endpoint=$(POD_IP):9809")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--http-endpoint: "), "{stderr}");
}
