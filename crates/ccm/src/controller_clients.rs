//! `--use-service-account-credentials`: each controller talks to the apiserver as its own
//! ServiceAccount in kube-system (as upstream: `node-controller`, `service-controller`,
//! `route-controller`, bound by the apiserver's bootstrap `system:controller:*` roles), with
//! short-lived tokens from the TokenRequest API that are renewed before they expire. Informers
//! keep using the CCM's own identity, as upstream's shared informers do.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use http::header::AUTHORIZATION;
use http::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::client::ClientBuilder;
use kube::Client;
use stratus_runtime::backoff::Backoff;
use tokio::sync::Mutex;

/// Where controller ServiceAccounts live.
pub const NAMESPACE: &str = "kube-system";

/// Lifetime asked for each token (the apiserver may shorten it; it never goes below 10 min).
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// The ServiceAccount a controller acts as, as upstream names them.
pub fn account_for(controller: &str) -> &'static str {
    match controller {
        "service" => "service-controller",
        "route" => "route-controller",
        // cloud-node, cloud-node-lifecycle and node-ipam act as the node controller.
        _ => "node-controller",
    }
}

/// When to renew a token valid for `lifetime` from now: at 80 % of it, never sooner than 10 s.
pub fn renew_after(lifetime: Duration) -> Duration {
    (lifetime * 4 / 5).max(Duration::from_secs(10))
}

/// The clients controllers use.
pub enum ControllerClients {
    /// Every controller uses the CCM's own client.
    Shared(Client),
    /// One client per ServiceAccount, made on first use.
    PerAccount(Box<PerAccount>),
}

/// Clients made per ServiceAccount on first use, with renewed TokenRequest tokens.
pub struct PerAccount {
    /// The CCM's client: creates the accounts and requests their tokens.
    root: Client,
    /// The CCM's connection settings without its credentials.
    anonymous: kube::Config,
    /// `--kube-api-qps`/`--kube-api-burst`: each account's client its own bucket.
    limits: stratus_kube_kit::KubeApiArgs,
    made: Mutex<BTreeMap<&'static str, Client>>,
}

impl ControllerClients {
    /// Every controller uses the CCM's own client.
    pub fn shared(client: Client) -> Self {
        ControllerClients::Shared(client)
    }

    /// Per-controller clients built on `config` (the CCM's own connection settings).
    pub fn per_account(
        config: &kube::Config,
        root: Client,
        limits: stratus_kube_kit::KubeApiArgs,
    ) -> Self {
        let mut anonymous = config.clone();
        anonymous.auth_info = kube::config::AuthInfo::default();
        ControllerClients::PerAccount(Box::new(PerAccount {
            root,
            anonymous,
            limits,
            made: Mutex::new(BTreeMap::new()),
        }))
    }

    /// The client `controller` acts with.
    pub async fn client_for(&self, controller: &str) -> anyhow::Result<Client> {
        match self {
            ControllerClients::Shared(c) => Ok(c.clone()),
            ControllerClients::PerAccount(p) => p.client_for(account_for(controller)).await,
        }
    }
}

impl PerAccount {
    async fn client_for(&self, account: &'static str) -> anyhow::Result<Client> {
        let mut made = self.made.lock().await;
        if let Some(c) = made.get(account) {
            return Ok(c.clone());
        }
        ensure_account(&self.root, account).await?;
        let (token, lifetime) = request_token(&self.root, account).await?;
        let current = Arc::new(RwLock::new(token));
        tokio::spawn(keep_renewed(
            self.root.clone(),
            account,
            current.clone(),
            lifetime,
        ));
        let bearer = current.clone();
        let layer = tower::util::MapRequestLayer::new(
            move |mut request: http::Request<kube::client::Body>| {
                let value = bearer.read().unwrap_or_else(|e| e.into_inner()).clone();
                request.headers_mut().insert(AUTHORIZATION, value);
                request
            },
        );
        let client = ClientBuilder::try_from(self.anonymous.clone())
            .with_context(|| format!("cannot build the client of ServiceAccount {account}"))?
            .with_layer(&layer)
            .build();
        let client = self.limits.limit(client);
        tracing::info!(
            account,
            namespace = NAMESPACE,
            "controller acts as its own ServiceAccount"
        );
        made.insert(account, client.clone());
        Ok(client)
    }
}

/// Gets the ServiceAccount, creating it when absent (losing a create race is fine).
async fn ensure_account(root: &Client, account: &str) -> anyhow::Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    if api
        .get_opt(account)
        .await
        .with_context(|| format!("cannot read ServiceAccount {NAMESPACE}/{account}"))?
        .is_some()
    {
        return Ok(());
    }
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(account.into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => {
            tracing::info!(account, "created the controller's ServiceAccount");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => {
            Err(e).with_context(|| format!("cannot create ServiceAccount {NAMESPACE}/{account}"))
        }
    }
}

/// A fresh token for `account` as an `Authorization` header value, and how long it is valid.
async fn request_token(root: &Client, account: &str) -> anyhow::Result<(HeaderValue, Duration)> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued: TokenRequest = api
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .with_context(|| {
            format!("cannot request a token for ServiceAccount {NAMESPACE}/{account}")
        })?;
    let status = issued
        .status
        .context("TokenRequest answered without a status")?;
    let expires = status.expiration_timestamp.0;
    let lifetime = Duration::from_secs(
        (expires.as_second() - now_seconds())
            .max(0)
            .try_into()
            .unwrap_or(0),
    );
    let mut value = HeaderValue::from_str(&format!("Bearer {}", status.token))
        .context("the issued token is not a valid header value")?;
    // Never printed by http's Debug either.
    value.set_sensitive(true);
    Ok((value, lifetime))
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Replaces the token at 80 % of its lifetime; on failure retries with backoff while the old one
/// is still valid (the apiserver rejects it afterwards and the controller's calls fail loudly).
async fn keep_renewed(
    root: Client,
    account: &'static str,
    current: Arc<RwLock<HeaderValue>>,
    mut lifetime: Duration,
) {
    let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        tokio::time::sleep(renew_after(lifetime)).await;
        let mut failures = 0;
        loop {
            match request_token(&root, account).await {
                Ok((value, valid)) => {
                    *current.write().unwrap_or_else(|e| e.into_inner()) = value;
                    lifetime = valid;
                    tracing::debug!(account, "renewed the controller's token");
                    break;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(account, error = %format!("{e:#}"), "token renewal failed; retrying");
                    tokio::time::sleep(backoff.delay(failures)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_act_as_upstreams_accounts() {
        assert_eq!(account_for("cloud-node"), "node-controller");
        assert_eq!(account_for("cloud-node-lifecycle"), "node-controller");
        assert_eq!(account_for("node-ipam"), "node-controller");
        assert_eq!(account_for("service"), "service-controller");
        assert_eq!(account_for("route"), "route-controller");
    }

    #[test]
    fn tokens_are_renewed_well_before_expiry() {
        assert_eq!(
            renew_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            renew_after(Duration::from_secs(600)),
            Duration::from_secs(480)
        );
        assert_eq!(renew_after(Duration::ZERO), Duration::from_secs(10));
    }
}
