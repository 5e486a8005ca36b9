//! The AWS proxy's control endpoints from the test side (counters, holds, faults, timeline, ECR
//! token lifetime), shared by [`crate::TestEnv`] and [`crate::AwsEnv`].

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};

use super::proxy::ebs::{EbsKnobs, EBS_PATH};
use super::proxy::{EcrToken, ECR_TOKEN_PATH, REQUEST_BODIES_PATH};
use crate::core::proxy::{self, Fault, Hold, Second};
use crate::core::util::HttpClient;

/// The proxy listening at `endpoint` (e.g. `http://127.0.0.1:4566`).
#[derive(Debug, Clone, Copy)]
pub struct ProxyControl<'a> {
    /// The proxy's base URL.
    pub endpoint: &'a str,
}

impl ProxyControl<'_> {
    /// What a process using the proxy as its AWS needs: the endpoint, moto's test credentials,
    /// `us-east-1`, and IMDS off.
    pub fn aws_env_vars(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// Requests seen so far, keyed by `service:Action`.
    pub async fn counts(&self) -> Result<BTreeMap<String, u64>> {
        self.get(proxy::COUNTS_PATH).await
    }

    /// What the proxy saw each second, keyed by Unix second.
    pub async fn timeline(&self) -> Result<BTreeMap<u64, Second>> {
        self.get(proxy::TIMELINE_PATH).await
    }

    /// Recorded `(service:Action, form body)` of [`super::proxy::RECORDED_BODIES`], in arrival order.
    pub async fn request_bodies(&self) -> Result<Vec<(String, String)>> {
        self.get(REQUEST_BODIES_PATH).await
    }

    /// Zeroes the counters and the timeline.
    pub async fn reset(&self) -> Result<()> {
        self.post(proxy::RESET_PATH, None).await
    }

    /// Holds matching requests from now on; an empty list stops holding.
    pub async fn hold(&self, holds: &[Hold]) -> Result<()> {
        self.post(proxy::HOLD_PATH, Some(serde_json::to_vec(holds)?))
            .await
    }

    /// Lets every request held so far go on.
    pub async fn release(&self) -> Result<()> {
        self.post(proxy::RELEASE_PATH, None).await
    }

    /// Injects faults from now on; an empty list stops injecting.
    pub async fn set_faults(&self, faults: &[Fault]) -> Result<()> {
        self.post(proxy::FAULTS_PATH, Some(serde_json::to_vec(faults)?))
            .await
    }

    /// Lifetime of the ECR tokens answered from now on; `None` keeps moto's expired ones.
    pub async fn set_ecr_token_lifetime(&self, lifetime: Option<Duration>) -> Result<()> {
        let body = serde_json::to_vec(&EcrToken {
            lifetime_seconds: lifetime.map(|l| l.as_secs()),
        })?;
        self.post(ECR_TOKEN_PATH, Some(body)).await
    }

    /// The EC2 volume knobs from now on (see [`super::proxy::ebs`]); the default turns them off.
    pub async fn set_ebs_knobs(&self, knobs: &EbsKnobs) -> Result<()> {
        self.post(EBS_PATH, Some(serde_json::to_vec(knobs)?)).await
    }

    /// The ASG lifecycle calls the proxy answered (see [`crate::aws::lifecycle`]).
    pub async fn lifecycle_calls(&self) -> Result<Vec<crate::aws::lifecycle::LifecycleCall>> {
        self.get(crate::aws::lifecycle::ACTIONS_PATH).await
    }

    /// Emits an ASG lifecycle hook notification through moto's EventBridge; returns the token.
    pub async fn lifecycle_notify(&self, notify: &crate::aws::lifecycle::Notify) -> Result<String> {
        let url = format!("{}{}", self.endpoint, crate::aws::lifecycle::NOTIFY_PATH);
        let (status, body) = HttpClient::new()
            .send_body(http::Method::POST, &url, serde_json::to_vec(notify)?)
            .await?;
        anyhow::ensure!(
            status.is_success(),
            "POST {url}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        let answer: serde_json::Value = serde_json::from_slice(&body)?;
        answer["token"]
            .as_str()
            .map(str::to_owned)
            .context("no token in the answer")
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = format!("{}{path}", self.endpoint);
        let (status, body) = HttpClient::new().get(&url).await?;
        anyhow::ensure!(status.is_success(), "GET {url}: {status}");
        serde_json::from_slice(&body).with_context(|| format!("parsing {url}"))
    }

    async fn post(&self, path: &str, body: Option<Vec<u8>>) -> Result<()> {
        let url = format!("{}{path}", self.endpoint);
        let client = HttpClient::new();
        let (status, _) = match body {
            Some(body) => client.send_body(http::Method::POST, &url, body).await?,
            None => client.send(http::Method::POST, &url).await?,
        };
        anyhow::ensure!(status.is_success(), "POST {url}: {status}");
        Ok(())
    }
}
