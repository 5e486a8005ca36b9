//! The HTTP seam towards OpenStack: one pooled HTTPS client (native roots plus `ca-file`, an
//! optional client certificate, or `tls-insecure`), with the `request-timeout` of `[Metadata]`,
//! through the proxy the environment names ([`crate::client::proxy`]).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use stratus_runtime::any_certificate::AnyServerCertificate;
use stratus_runtime::proxy_env::{ProxyEnv, ProxyEnvError};

use crate::client::proxy::ProxyConnector;
use crate::config::TlsOptions;

/// Largest response body read (a page of 1000 servers is a few MB).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Why the HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file is unreadable or not PEM.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the settings.
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
    /// A proxy variable of the environment is not a usable proxy URL.
    #[error("proxy settings: {0}")]
    Proxy(#[from] ProxyEnvError),
}

impl TlsError {
    /// The error for a person: after `setting` (where the TLS settings came from, e.g.
    /// `"[Global] "`), or naming the proxy variable when that is what is wrong.
    pub fn named(&self, setting: &str) -> String {
        match self {
            TlsError::Proxy(_) => self.to_string(),
            other => format!("{setting}{other}"),
        }
    }
}

/// An answer: status, headers and the whole body.
#[derive(Debug)]
pub struct HttpResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// A request that got no answer (connection, TLS, timeout): the answer is unknown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// Stratus's User-Agent.
const USER_AGENT: &str = concat!("stratus/", env!("CARGO_PKG_VERSION"));

/// The pooled client.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<ProxyConnector, Full<Bytes>>,
    proxy: ProxyEnv,
    timeout: Duration,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl HttpClient {
    /// A client with `tls` settings and a per-request `timeout`, through the proxies the
    /// environment names (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, either case).
    pub fn new(tls: &TlsOptions, timeout: Duration) -> Result<HttpClient, TlsError> {
        HttpClient::with_proxy(tls, timeout, ProxyEnv::from_env()?)
    }

    /// A client with `tls` settings, a per-request `timeout` and the proxy settings `proxy`.
    pub fn with_proxy(
        tls: &TlsOptions,
        timeout: Duration,
        proxy: ProxyEnv,
    ) -> Result<HttpClient, TlsError> {
        let connector = ProxyConnector::new(tls_config(tls)?, proxy.clone());
        Ok(HttpClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            proxy,
            timeout,
            user_agent: HeaderValue::from_static(USER_AGENT),
        })
    }

    /// The same client sending `extra` after Stratus's own User-Agent (`--user-agent`, as
    /// upstream's OpenStack clients); an entry that is not a valid header value is refused.
    pub fn with_extra_user_agent(mut self, extra: &[String]) -> Result<HttpClient, String> {
        if extra.is_empty() {
            return Ok(self);
        }
        let value = std::iter::once(USER_AGENT)
            .chain(extra.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        self.user_agent = HeaderValue::from_str(&value)
            .map_err(|_| format!("--user-agent: not a header value: {extra:?}"))?;
        Ok(self)
    }

    /// Sends one request; `Err` only when no answer came.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Option<Vec<u8>>,
    ) -> Result<HttpResponse, TransportError> {
        let mut request = http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        request = request.header(http::header::ACCEPT, "application/json");
        request = request.header(http::header::USER_AGENT, self.user_agent.clone());
        let mut request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| TransportError(format!("bad request to {url}: {e}")))?;
        // A plain-HTTP request goes to the proxy itself, which wants its credentials on it (a
        // tunnelled one carries them in the CONNECT instead).
        if request.uri().scheme_str() == Some("http") {
            if let Some(auth) = self
                .proxy
                .intercept(request.uri())
                .and_then(|i| i.basic_auth().cloned())
            {
                request
                    .headers_mut()
                    .insert(http::header::PROXY_AUTHORIZATION, auth);
            }
        }
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| TransportError(describe(&e)))?;
            let (parts, body) = response.into_parts();
            let body = http_body_util::Limited::new(body, MAX_BODY)
                .collect()
                .await
                .map_err(|e| TransportError(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(HttpResponse {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(TransportError(format!(
                "no answer within {:?} (request-timeout)",
                self.timeout
            ))),
        }
    }
}

/// An error and its causes on one line.
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The certificates of PEM text (an inline CA such as Deckhouse's `caCert`).
fn parse_pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File {
            path: "the inline CA".into(),
            message: stratus_runtime::redact::pem(&e),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: "the inline CA".into(),
            message: "holds no PEM certificate".into(),
        });
    }
    Ok(certs)
}

fn read_pem_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let shown = path.display().to_string();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| TlsError::File {
            path: shown.clone(),
            message: stratus_runtime::redact::pem(&e),
        })?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File {
            path: shown.clone(),
            message: stratus_runtime::redact::pem(&e),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: shown,
            message: "holds no PEM certificate".into(),
        });
    }
    Ok(certs)
}

fn tls_config(tls: &TlsOptions) -> Result<rustls::ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = if tls.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate::new(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(ca) = &tls.ca_file {
            for cert in read_pem_certs(ca)? {
                roots.add(cert)?;
            }
        }
        if let Some(pem) = &tls.ca_pem {
            for cert in parse_pem_certs(pem)? {
                roots.add(cert)?;
            }
        }
        builder.with_root_certificates(roots)
    };
    Ok(match &tls.client_cert {
        Some((cert, key)) => {
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
                path: key.display().to_string(),
                message: stratus_runtime::redact::pem(&e),
            })?;
            builder.with_client_auth_cert(read_pem_certs(cert)?, key)?
        }
        None => builder.with_no_client_auth(),
    })
}
