//! The connector beneath the OpenStack HTTP client, honouring the environment's proxy settings
//! ([`stratus_runtime::proxy_env`]): an `https://` target goes through a CONNECT tunnel to the
//! proxy (TLS end to end inside it), an `http://` target is sent to the proxy itself (the
//! connection marked proxied, so the request goes in absolute form), and a target in
//! `NO_PROXY`, or any target when no proxy is set, is connected directly.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use stratus_runtime::proxy_env::ProxyEnv;
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection, direct, tunnelled or to the proxy.
pub struct ProxyStream {
    inner: MaybeHttpsStream<TokioIo<TcpStream>>,
    /// Connected to a forwarding proxy for a plain-HTTP target (absolute-form requests).
    forwarding: bool,
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        self.inner.connected().proxy(self.forwarding)
    }
}

impl hyper::rt::Read for ProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
}

/// Connects each target directly or through the proxy the environment names for it.
#[derive(Clone)]
pub struct ProxyConnector {
    env: ProxyEnv,
    tls: rustls::ClientConfig,
    direct: HttpsConnector<HttpConnector>,
}

impl ProxyConnector {
    /// A connector with `tls` for the targets and the proxy settings `env`.
    pub fn new(tls: rustls::ClientConfig, env: ProxyEnv) -> ProxyConnector {
        let direct = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
            .build();
        ProxyConnector { env, tls, direct }
    }

    /// The proxy settings in force.
    pub fn env(&self) -> &ProxyEnv {
        &self.env
    }
}

fn plain_http() -> HttpConnector {
    let mut http = HttpConnector::new();
    // The scheme is the target's business (https goes through TLS above this connector).
    http.enforce_http(false);
    http
}

impl tower::Service<Uri> for ProxyConnector {
    type Response = ProxyStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ProxyStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, target: Uri) -> Self::Future {
        let intercept = self.env.intercept(&target);
        let https = target.scheme_str() == Some("https");
        match intercept {
            None => {
                let mut direct = self.direct.clone();
                Box::pin(async move {
                    let inner = tower::Service::call(&mut direct, target).await?;
                    Ok(ProxyStream {
                        inner,
                        forwarding: false,
                    })
                })
            }
            Some(proxy) if https => {
                let mut tunnel = Tunnel::new(proxy.uri().clone(), plain_http());
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let mut tls = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(self.tls.clone())
                    .https_only()
                    .enable_http1()
                    .wrap_connector(tunnel);
                Box::pin(async move {
                    let inner = tower::Service::call(&mut tls, target)
                        .await
                        .map_err(|e| via(proxy.uri(), e))?;
                    Ok(ProxyStream {
                        inner,
                        forwarding: false,
                    })
                })
            }
            Some(proxy) => {
                let mut http = plain_http();
                Box::pin(async move {
                    let stream = tower::Service::call(&mut http, proxy.uri().clone())
                        .await
                        .map_err(|e| via(proxy.uri(), e.into()))?;
                    Ok(ProxyStream {
                        inner: MaybeHttpsStream::Http(stream),
                        forwarding: true,
                    })
                })
            }
        }
    }
}

/// An error of a connection through `proxy`, naming it (without credentials: the intercept's
/// URI has none).
fn via(proxy: &Uri, e: BoxError) -> BoxError {
    format!("through the proxy {proxy}: {e}").into()
}
