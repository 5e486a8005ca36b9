//! ACM certificates in moto for tests of HTTPS listeners (moto refuses a listener naming a
//! certificate it does not hold): RequestCertificate over ACM's JSON protocol, straight to
//! moto's endpoint, since the workspace has no ACM SDK client.

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// Requests a certificate for `domain` from moto at `endpoint` (`http://host:port`); its ARN.
pub async fn request_certificate(endpoint: &str, domain: &str) -> Result<String> {
    let authority = endpoint
        .strip_prefix("http://")
        .context("moto endpoint is not http://")?
        .trim_end_matches('/');
    let stream = tokio::net::TcpStream::connect(authority).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let body = serde_json::json!({"DomainName": domain}).to_string();
    let request = hyper::Request::post("/")
        .header("host", authority)
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amz-target", "CertificateManager.RequestCertificate")
        // moto picks the service from the credential scope and checks no signature.
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/acm/aws4_request, SignedHeaders=host, Signature=0",
        )
        .body(Full::new(Bytes::from(body)))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "RequestCertificate: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    let answer: serde_json::Value = serde_json::from_slice(&bytes)?;
    answer["CertificateArn"]
        .as_str()
        .map(str::to_string)
        .context("RequestCertificate answered no CertificateArn")
}
