//! ACM certificates in moto for tests of HTTPS listeners (moto refuses a listener naming a
//! certificate it does not hold): RequestCertificate over ACM's JSON protocol, straight to
//! moto's endpoint, since the workspace has no ACM SDK client.

use anyhow::{Context, Result};

use crate::moto_call;

/// Requests a certificate for `domain` from moto at `endpoint` (`http://host:port`); its ARN.
pub async fn request_certificate(endpoint: &str, domain: &str) -> Result<String> {
    let body = serde_json::json!({"DomainName": domain}).to_string();
    let bytes = moto_call::post(
        endpoint,
        "acm",
        &[
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", "CertificateManager.RequestCertificate"),
        ],
        body,
        "RequestCertificate",
    )
    .await?;
    let answer: serde_json::Value = serde_json::from_slice(&bytes)?;
    answer["CertificateArn"]
        .as_str()
        .map(str::to_string)
        .context("RequestCertificate answered no CertificateArn")
}
