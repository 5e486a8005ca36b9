//! Helpers for the sidecar binaries' integration tests (feature `testing`): a fake CSI driver
//! serving Identity on a unix socket with answers a test can change, a minimal HTTP GET, a free
//! loopback port, and polling with a deadline (no fixed sleeps).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stratus_csi_spec::v1::identity_server::{Identity, IdentityServer};
use stratus_csi_spec::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, ProbeRequest, ProbeResponse,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

/// How the fake driver answers Probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// `ready: true`.
    Ready,
    /// `ready: false`.
    NotReady,
    /// `ready` unset.
    Unset,
    /// A gRPC error with this message (code Unavailable).
    Fail(String),
    /// No answer until the caller gives up.
    Hang,
}

#[derive(Debug, Clone)]
struct FakeIdentity {
    name: String,
    probe: Arc<Mutex<ProbeAnswer>>,
}

#[tonic::async_trait]
impl Identity for FakeIdentity {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "0.0.0-test".into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse::default()))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        let answer = self.probe.lock().expect("probe answer lock").clone();
        let ready = match answer {
            ProbeAnswer::Ready => Some(true),
            ProbeAnswer::NotReady => Some(false),
            ProbeAnswer::Unset => None,
            ProbeAnswer::Fail(message) => return Err(Status::unavailable(message)),
            ProbeAnswer::Hang => std::future::pending().await,
        };
        Ok(Response::new(ProbeResponse { ready }))
    }
}

/// A fake CSI driver: Identity only, on a unix socket.
#[derive(Debug)]
pub struct FakeDriver {
    socket: PathBuf,
    probe: Arc<Mutex<ProbeAnswer>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl FakeDriver {
    /// Serves Identity as driver `name` on `socket` (Probe: ready).
    pub fn start(socket: &Path, name: &str) -> std::io::Result<FakeDriver> {
        let listener = tokio::net::UnixListener::bind(socket)?;
        let probe = Arc::new(Mutex::new(ProbeAnswer::Ready));
        let identity = FakeIdentity {
            name: name.to_string(),
            probe: probe.clone(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(IdentityServer::new(identity))
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(FakeDriver {
            socket: socket.to_path_buf(),
            probe,
            stop: Some(stop),
            task,
        })
    }

    /// Changes how Probe answers from now on.
    pub fn answer_probe(&self, answer: ProbeAnswer) {
        *self.probe.lock().expect("probe answer lock") = answer;
    }

    /// Stops serving and removes the socket.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
        let _ = (&mut self.task).await;
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `GET path` on `addr` (HTTP/1.1, connection closed after): status code and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let bad = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not HTTP: {text:?}"),
        )
    };
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(bad)?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .ok_or_else(bad)?;
    Ok((status, body))
}

/// Polls `check` every 50 ms until it gives `Some`, for at most `timeout`; panics naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
