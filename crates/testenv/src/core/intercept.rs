//! A TLS-intercepting forward proxy for a client whose cloud endpoint cannot be configured
//! (machine-controller-manager v0.45.0's aws-sdk-go v1.23 always calls
//! `https://ec2.<region>.amazonaws.com`): it answers `CONNECT host:443` itself, completes TLS as
//! `host` with a certificate from its own CA (the client trusts the CA through `SSL_CERT_FILE`),
//! and carries the decrypted stream to a plain-HTTP upstream on loopback — the counting proxy in
//! front of moto. No name is resolved and nothing leaves 127.0.0.1.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The longest CONNECT request head accepted.
const MAX_HEAD: usize = 8192;
/// How much of what clients send is kept for [`InterceptProxy::sent`].
const MAX_SENT: usize = 8 << 20;

/// A running intercepting proxy; stops on drop.
pub struct InterceptProxy {
    addr: SocketAddr,
    ca_file: PathBuf,
    tunnels: Arc<Mutex<Vec<String>>>,
    sent: Arc<Mutex<Vec<u8>>>,
    task: JoinHandle<()>,
}

/// The proxy's CA and the server configurations it made per host.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
    ca: CertificateDer<'static>,
    configs: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl InterceptProxy {
    /// Starts on a free 127.0.0.1 port, writing its CA certificate into `dir/intercept-ca.pem`;
    /// every tunnel's plaintext goes to `upstream`.
    pub async fn start(upstream: SocketAddr, dir: &Path) -> Result<InterceptProxy> {
        if !upstream.ip().is_loopback() {
            bail!("the intercepting proxy only forwards to loopback, not {upstream}");
        }
        let key = KeyPair::generate().context("generating the intercept CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "stratus-testenv intercept CA");
        let ca = params.self_signed(&key)?;
        let ca_file = dir.join("intercept-ca.pem");
        std::fs::write(&ca_file, ca.pem())
            .with_context(|| format!("writing {}", ca_file.display()))?;
        let authority = Arc::new(Authority {
            issuer: Issuer::new(params, key),
            ca: ca.der().clone(),
            configs: Mutex::new(HashMap::new()),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let seen = tunnels.clone();
        let transcript = sent.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let authority = authority.clone();
                let seen = seen.clone();
                let transcript = transcript.clone();
                tokio::spawn(async move {
                    let log = Log {
                        tunnels: &seen,
                        sent: &transcript,
                    };
                    if let Err(err) = tunnel(client, upstream, &authority, log).await {
                        eprintln!("stratus-testenv: intercept: {err:#}");
                    }
                });
            }
        });
        Ok(InterceptProxy {
            addr,
            ca_file,
            tunnels,
            sent,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`, for `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The CA certificate (PEM) a client must trust.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The `host:port` of every tunnel asked for so far.
    pub fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// What clients sent inside their tunnels so far (decrypted, all tunnels in the order the
    /// bytes arrived, at most 8 MiB): the requests as the client made them.
    pub fn sent(&self) -> String {
        self.sent
            .lock()
            .map(|s| String::from_utf8_lossy(&s).into_owned())
            .unwrap_or_default()
    }

    /// The environment a Go client needs: HTTPS through this proxy, loopback direct, and this
    /// proxy's CA as the only trusted one (for Go and for aws-sdk-go's own bundle variable).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HTTPS_PROXY".into(), self.url()),
            ("HTTP_PROXY".into(), String::new()),
            ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
            (
                "SSL_CERT_FILE".into(),
                self.ca_file.to_string_lossy().into_owned(),
            ),
            // aws-sdk-go prefers its own bundle variable over the system pool when set (this
            // machine's environment sets it).
            (
                "AWS_CA_BUNDLE".into(),
                self.ca_file.to_string_lossy().into_owned(),
            ),
        ]
    }
}

impl Drop for InterceptProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Authority {
    /// A server configuration presenting a certificate for `host`, made once per host.
    fn config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>> {
        let mut configs = self
            .configs
            .lock()
            .map_err(|_| anyhow::anyhow!("certificate cache poisoned"))?;
        if let Some(config) = configs.get(host) {
            return Ok(config.clone());
        }
        let key = KeyPair::generate()?;
        let leaf = CertificateParams::new(vec![host.to_string()])?.signed_by(&key, &self.issuer)?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), self.ca.clone()],
                PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )?;
        let config = Arc::new(config);
        configs.insert(host.to_string(), config.clone());
        Ok(config)
    }
}

/// Where a tunnel records its target and what its client sent.
#[derive(Clone, Copy)]
struct Log<'a> {
    tunnels: &'a Mutex<Vec<String>>,
    sent: &'a Mutex<Vec<u8>>,
}

/// One client connection: the CONNECT head, `200`, TLS as the named host, then bytes both ways
/// between the decrypted stream and the upstream, the client's side recorded.
async fn tunnel(
    mut client: TcpStream,
    upstream: SocketAddr,
    authority: &Authority,
    log: Log<'_>,
) -> Result<()> {
    let head = read_head(&mut client).await?;
    let target = connect_target(&head)?;
    let host = target.rsplit_once(':').map_or(target.as_str(), |(h, _)| h);
    let config = authority.config(host)?;
    if let Ok(mut seen) = log.tunnels.lock() {
        seen.push(target.clone());
    }
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    let tls = tokio_rustls::TlsAcceptor::from(config)
        .accept(client)
        .await
        .with_context(|| format!("TLS as {host}"))?;
    let plain = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let (mut from_client, mut to_client) = tokio::io::split(tls);
    let (mut from_upstream, mut to_upstream) = plain.into_split();
    let upward = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = from_client.read(&mut buf).await?;
            if n == 0 {
                return to_upstream.shutdown().await;
            }
            if let Ok(mut sent) = log.sent.lock() {
                let room = MAX_SENT.saturating_sub(sent.len()).min(n);
                sent.extend_from_slice(&buf[..room]);
            }
            to_upstream.write_all(&buf[..n]).await?;
        }
    };
    let downward = async {
        tokio::io::copy(&mut from_upstream, &mut to_client).await?;
        to_client.shutdown().await
    };
    let _ = tokio::join!(upward, downward);
    Ok(())
}

/// Reads up to the blank line that ends a request head.
async fn read_head(client: &mut TcpStream) -> Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD || client.read(&mut byte).await? == 0 {
            bail!("no complete CONNECT request head");
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// `host:port` of a `CONNECT host:port HTTP/1.1` head; anything else is refused.
fn connect_target(head: &str) -> Result<String> {
    let line = head.lines().next().unwrap_or_default();
    match line.split(' ').collect::<Vec<_>>().as_slice() {
        ["CONNECT", target, version] if version.starts_with("HTTP/1.") && target.contains(':') => {
            Ok((*target).to_string())
        }
        _ => bail!("only CONNECT is served, got {line:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client trusting only the proxy's CA tunnels to a named host and its plain request
    /// arrives at the upstream.
    #[tokio::test]
    async fn tunnels_tls_for_a_named_host_to_the_plain_upstream() {
        use rustls::pki_types::pem::PemObject as _;
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        let dir = std::env::temp_dir().join(format!("intercept-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let proxy = InterceptProxy::start(upstream_addr, &dir).await.unwrap();
        let served = tokio::spawn(async move {
            let (mut conn, _) = upstream.accept().await.unwrap();
            let mut got = vec![0u8; 64];
            let n = conn.read(&mut got).await.unwrap();
            conn.write_all(b"pong").await.unwrap();
            String::from_utf8_lossy(&got[..n]).into_owned()
        });
        let mut tcp = TcpStream::connect(proxy.url().trim_start_matches("http://"))
            .await
            .unwrap();
        tcp.write_all(b"CONNECT ec2.us-east-1.amazonaws.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = vec![0u8; 39];
        tcp.read_exact(&mut answer).await.unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(proxy.ca_file()).unwrap();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("ec2.us-east-1.amazonaws.com").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("the proxy's certificate verifies against its CA");
        tls.write_all(b"ping").await.unwrap();
        let mut reply = [0u8; 4];
        tls.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"pong");
        assert_eq!(served.await.unwrap(), "ping");
        assert_eq!(proxy.tunnels(), ["ec2.us-east-1.amazonaws.com:443"]);
        assert_eq!(proxy.sent(), "ping");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn connect_heads_only() {
        assert_eq!(
            connect_target(
                "CONNECT ec2.eu-central-1.amazonaws.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            .unwrap(),
            "ec2.eu-central-1.amazonaws.com:443"
        );
        assert!(connect_target("GET http://x/ HTTP/1.1\r\n\r\n").is_err());
        assert!(connect_target("CONNECT nohostport HTTP/1.1\r\n\r\n").is_err());
    }
}
