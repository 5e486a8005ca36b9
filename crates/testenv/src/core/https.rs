//! A minimal HTTPS client for secure ports (the CCM's, the discoverer's) and webhook servers
//! (capdvp's runtime extension): one GET or JSON POST per connection, optionally with a bearer
//! token, a client certificate and more headers, trusting either any certificate (self-signed)
//! or exactly one; it reports the certificate the server presented.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use stratus_runtime::any_certificate::AnyServerCertificate;

/// Which server certificates the client accepts.
pub enum Trust {
    /// Any (the CCM's self-signed certificate); the handshake signature is still checked.
    Any,
    /// Only a chain to this certificate, valid for 127.0.0.1.
    Only(CertificateDer<'static>),
}

/// One answer.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: String,
    /// The body, as text.
    pub body: String,
    /// The leaf certificate the server presented.
    pub server_cert: CertificateDer<'static>,
}

/// What a request carries besides its path.
#[derive(Debug, Default, Clone, Copy)]
pub struct Credentials<'a> {
    /// `Authorization: Bearer …`.
    pub token: Option<&'a str>,
    /// A client certificate and its key (PEM).
    pub client_cert: Option<(&'a str, &'a str)>,
    /// More headers (e.g. a front proxy's `X-Remote-User`).
    pub headers: &'a [(&'a str, &'a str)],
}

/// `GET https://{addr}{path}`, with `Authorization: Bearer {token}` when given.
pub async fn get(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    trust: &Trust,
) -> anyhow::Result<Answer> {
    let credentials = Credentials {
        token,
        ..Credentials::default()
    };
    send(addr, http::Method::GET, path, &credentials, None, trust).await
}

/// `GET https://{addr}{path}` with `credentials`.
pub async fn get_with(
    addr: SocketAddr,
    path: &str,
    credentials: &Credentials<'_>,
    trust: &Trust,
) -> anyhow::Result<Answer> {
    send(addr, http::Method::GET, path, credentials, None, trust).await
}

/// `POST https://{addr}{path}` with `body` as `application/json`.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    trust: &Trust,
) -> anyhow::Result<Answer> {
    let body = serde_json::to_vec(body)?;
    send(
        addr,
        http::Method::POST,
        path,
        &Credentials::default(),
        Some(body),
        trust,
    )
    .await
}

async fn send(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    credentials: &Credentials<'_>,
    body: Option<Vec<u8>>,
    trust: &Trust,
) -> anyhow::Result<Answer> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match trust {
        Trust::Any => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate::new(provider))),
        Trust::Only(cert) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(cert.clone())?;
            builder.with_root_certificates(roots)
        }
    };
    let config = match credentials.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            use rustls::pki_types::pem::PemObject;
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .context("client certificate PEM")?;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())
                .context("client key PEM")?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    let token = credentials.token;
    let tls = connect(addr, config).await?;
    let server_cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .context("no server certificate")?
        .clone()
        .into_owned();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, addr.to_string());
    if body.is_some() {
        request = request.header(http::header::CONTENT_TYPE, "application/json");
    }
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    for (name, value) in credentials.headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(Full::new(Bytes::from(body.unwrap_or_default())))?)
        .await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
        server_cert,
    })
}

/// A TCP connection to `addr` and a TLS handshake over it with `config`.
async fn connect(
    addr: SocketAddr,
    config: rustls::ClientConfig,
) -> anyhow::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .context("TLS handshake")
}

/// A TLS handshake with `addr` (any certificate accepted) speaking only `version` and, when
/// given, offering only the cipher suite named `suite` (rustls's IANA spelling); the suite the
/// server chose, or why the handshake failed.
pub async fn handshake(
    addr: SocketAddr,
    version: &'static rustls::SupportedProtocolVersion,
    suite: Option<&str>,
) -> anyhow::Result<String> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if let Some(suite) = suite {
        provider
            .cipher_suites
            .retain(|s| format!("{:?}", s.suite()) == suite);
        anyhow::ensure!(
            !provider.cipher_suites.is_empty(),
            "rustls has no suite {suite}"
        );
    }
    let provider = Arc::new(provider);
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[version])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCertificate::new(provider)))
        .with_no_client_auth();
    let tls = connect(addr, config).await?;
    let chosen = tls
        .get_ref()
        .1
        .negotiated_cipher_suite()
        .context("no cipher suite negotiated")?;
    Ok(format!("{:?}", chosen.suite()))
}
