//! Small helpers shared by the modules: log tails, free ports, random tokens, plain HTTP probes.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("<could not read {}: {err}>", path.display()),
    }
}

/// Binds `n` listeners on 127.0.0.1:0 at the same time (so the ports are distinct) and returns
/// them. Callers that hand a port to a child process drop the listener right before spawning it.
pub(crate) fn free_listeners(n: usize) -> Result<Vec<TcpListener>> {
    (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a free port"))
        .collect()
}

/// A random hex token (128 bits from the OS).
pub(crate) fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A minimal plain-HTTP client for readiness probes and the proxy's control endpoints.
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl HttpClient {
    pub(crate) fn new() -> HttpClient {
        HttpClient {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Sends a request with an empty body and returns the status and the whole body.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        url: &str,
    ) -> Result<(http::StatusCode, Bytes)> {
        self.send_body(method, url, Vec::new()).await
    }

    /// Sends a request with `body` and returns the status and the whole response body.
    pub(crate) async fn send_body(
        &self,
        method: http::Method,
        url: &str,
        body: Vec<u8>,
    ) -> Result<(http::StatusCode, Bytes)> {
        let request = http::Request::builder()
            .method(method)
            .uri(url)
            .body(Full::new(Bytes::from(body)))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .with_context(|| format!("{url}: no answer within 5s"))?
    }

    /// Sends a request with `headers` (a JSON content type when there is a body) and returns
    /// the status, the headers and the whole body.
    pub(crate) async fn exchange(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<(http::StatusCode, http::HeaderMap, Bytes)> {
        let mut request = http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, headers, body))
        };
        tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .with_context(|| format!("{url}: no answer within 30s"))?
    }

    pub(crate) async fn get(&self, url: &str) -> Result<(http::StatusCode, Bytes)> {
        self.send(http::Method::GET, url).await
    }
}

/// Whether a start failed because a picked port was taken in the meantime (Go: "bind: address
/// already in use", Python: "[Errno 98] Address already in use").
pub(crate) fn is_port_conflict(err: &anyhow::Error) -> bool {
    format!("{err:#}")
        .to_ascii_lowercase()
        .contains("address already in use")
}

/// Deletes an environment's directory when `remove` (it made the directory itself), unless
/// `STRATUS_KEEP_ENV=1` asks to keep it for a post-mortem.
pub(crate) fn remove_env_dir(dir: &Path, remove: bool) {
    if std::env::var_os("STRATUS_KEEP_ENV").is_some_and(|v| v == "1") {
        eprintln!("stratus-testenv: kept {}", dir.display());
    } else if remove {
        let _ = std::fs::remove_dir_all(dir);
    }
}
