//! One request straight to moto for a service the workspace has no SDK client for (ACM, IAM):
//! moto picks the service from the SigV4 credential scope and checks no signature.

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// `POST /` to moto at `endpoint` (`http://host:port`) as `service`, with `headers` and `body`;
/// the answer's body, or an error naming `what` and moto's answer when it is not a success.
pub async fn post(
    endpoint: &str,
    service: &str,
    headers: &[(&str, &str)],
    body: String,
    what: &str,
) -> Result<Bytes> {
    let authority = endpoint
        .strip_prefix("http://")
        .context("moto endpoint is not http://")?
        .trim_end_matches('/');
    let stream = tokio::net::TcpStream::connect(authority).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut request = hyper::Request::post("/").header("host", authority).header(
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        ),
    );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(Full::new(Bytes::from(body)))?)
        .await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "{what}: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    Ok(bytes)
}
