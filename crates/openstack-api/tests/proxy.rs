//! The OpenStack HTTP client through a real forward proxy (proxy.py): an https target through a
//! CONNECT tunnel, an http target in absolute form with the proxy's credentials, a target in
//! NO_PROXY connected directly, and a bad proxy URL refused by name.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use stratus_openstack_api::client::http::{HttpClient, TlsError};
use stratus_openstack_api::config::TlsOptions;
use stratus_runtime::proxy_env::ProxyEnv;
use stratus_testenv::tools::connect_proxy::ConnectProxy;
use tokio::net::TcpListener;

const WAIT: Duration = Duration::from_secs(20);

/// A server on `host` (loopback) answering `hello <scheme> <path>`, over TLS when `tls`; returns
/// its port.
async fn target(host: &str, tls: bool) -> u16 {
    let listener = TcpListener::bind((host, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tls.then(|| {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let scheme = if tls { "https" } else { "http" };
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: http::Request<_>| async move {
                    let body = format!("hello {scheme} {}", req.uri());
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(body))))
                });
                let builder = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    Some(a) => {
                        if let Ok(tls) = a.accept(tcp).await {
                            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            });
        }
    });
    port
}

fn insecure() -> TlsOptions {
    TlsOptions {
        ca_file: None,
        ca_pem: None,
        client_cert: None,
        insecure: true,
    }
}

fn env(pairs: Vec<(&'static str, String)>) -> ProxyEnv {
    ProxyEnv::from_lookup(move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

async fn get(client: &HttpClient, url: &str) -> String {
    let answer = client.send(Method::GET, url, &[], None).await.unwrap();
    assert_eq!(answer.status, 200, "{url}");
    String::from_utf8(answer.body.to_vec()).unwrap()
}

#[tokio::test]
async fn https_tunnels_http_forwards_and_no_proxy_bypasses() {
    let proxy = ConnectProxy::start_with_credentials("stratus", "s3cret")
        .await
        .unwrap();
    let tls_port = target("127.0.0.1", true).await;
    let plain_port = target("127.0.0.1", false).await;
    let direct_port = target("127.0.0.2", true).await;
    // 127.0.0.2 is loopback too: only it bypasses the proxy.
    let client = HttpClient::with_proxy(
        &insecure(),
        WAIT,
        env(vec![
            ("https_proxy", proxy.url()),
            ("HTTP_PROXY", proxy.url()),
            ("NO_PROXY", "127.0.0.2".into()),
        ]),
    )
    .unwrap();

    // https: a CONNECT tunnel, TLS inside it, the request in origin form.
    let body = get(&client, &format!("https://127.0.0.1:{tls_port}/v3/auth")).await;
    assert_eq!(body, "hello https /v3/auth");
    proxy
        .wait_for("CONNECT to the https target", WAIT, |r| {
            r.method == "CONNECT" && r.target == format!("127.0.0.1:{tls_port}")
        })
        .await
        .unwrap();

    // http: the request itself to the proxy, in absolute form, with Proxy-Authorization.
    let body = get(
        &client,
        &format!("http://127.0.0.1:{plain_port}/v2.1/servers"),
    )
    .await;
    assert_eq!(body, "hello http /v2.1/servers");
    proxy
        .wait_for("forwarded GET to the http target", WAIT, |r| {
            r.method == "GET" && r.target == format!("127.0.0.1:{plain_port}/v2.1/servers")
        })
        .await
        .unwrap();

    // NO_PROXY: straight to the target; the proxy never hears of it.
    let body = get(&client, &format!("https://127.0.0.2:{direct_port}/direct")).await;
    assert_eq!(body, "hello https /direct");
    assert!(
        proxy
            .requests()
            .iter()
            .all(|r| !r.target.contains("127.0.0.2")),
        "{:?}",
        proxy.requests()
    );
}

#[tokio::test]
async fn wrong_proxy_credentials_fail_the_request() {
    let proxy = ConnectProxy::start_with_credentials("stratus", "s3cret")
        .await
        .unwrap();
    let port = target("127.0.0.1", true).await;
    let wrong = format!("http://stratus:wrong@127.0.0.1:{}", proxy.port());
    let client =
        HttpClient::with_proxy(&insecure(), WAIT, env(vec![("HTTPS_PROXY", wrong)])).unwrap();
    let e = client
        .send(
            Method::GET,
            &format!("https://127.0.0.1:{port}/"),
            &[],
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("through the proxy http://127.0.0.1:"), "{e}");
    assert!(!e.contains("wrong"), "credentials leaked: {e}");
}

#[test]
fn a_bad_proxy_url_is_refused_by_name() {
    let e = ProxyEnv::from_lookup(|name| (name == "HTTPS_PROXY").then(|| "ftp://proxy:21".into()))
        .unwrap_err();
    let e = TlsError::from(e).to_string();
    assert!(
        e.starts_with("proxy settings: HTTPS_PROXY: unsupported proxy scheme"),
        "{e}"
    );
}
