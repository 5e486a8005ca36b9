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

/// A running intercepting proxy; stops on drop.
pub struct InterceptProxy {
    addr: SocketAddr,
    ca_file: PathBuf,
    tunnels: Arc<Mutex<Vec<String>>>,
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
        let seen = tunnels.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let authority = authority.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    if let Err(err) = tunnel(client, upstream, &authority, &seen).await {
                        eprintln!("stratus-testenv: intercept: {err:#}");
                    }
                });
            }
        });
        Ok(InterceptProxy {
            addr,
            ca_file,
            tunnels,
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
        self.tunnels
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// The environment a Go client needs: HTTPS through this proxy, loopback direct, and this
    /// proxy's CA as the only trusted one.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HTTPS_PROXY".into(), self.url()),
            ("HTTP_PROXY".into(), String::new()),
            ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
            (
                "SSL_CERT_FILE".into(),
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

/// One client connection: the CONNECT head, `200`, TLS as the named host, then bytes both ways
/// between the decrypted stream and the upstream.
async fn tunnel(
    mut client: TcpStream,
    upstream: SocketAddr,
    authority: &Authority,
    seen: &Mutex<Vec<String>>,
) -> Result<()> {
    let head = read_head(&mut client).await?;
    let target = connect_target(&head)?;
    let host = target.rsplit_once(':').map_or(target.as_str(), |(h, _)| h);
    let config = authority.config(host)?;
    if let Ok(mut seen) = seen.lock() {
        seen.push(target.clone());
    }
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    let mut tls = tokio_rustls::TlsAcceptor::from(config)
        .accept(client)
        .await
        .with_context(|| format!("TLS as {host}"))?;
    let mut plain = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
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

    #[test]
    fn connect_heads_only() {
        assert_eq!(
            connect_target("CONNECT ec2.eu-central-1.amazonaws.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap(),
            "ec2.eu-central-1.amazonaws.com:443"
        );
        assert!(connect_target("GET http://x/ HTTP/1.1\r\n\r\n").is_err());
        assert!(connect_target("CONNECT nohostport HTTP/1.1\r\n\r\n").is_err());
    }
}
