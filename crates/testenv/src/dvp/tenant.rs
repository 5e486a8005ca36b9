//! The tenant's identity in the parent cluster, as Deckhouse gives it: a namespace (the
//! project), a ServiceAccount in it bound by a Role to that namespace only, and a kubeconfig
//! carrying the ServiceAccount's token.

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

/// The tenant project's Role: what a project administrator may do in their namespace (the
/// virtualization kinds, Services, ServiceWithHealthchecks, Secrets); nothing outside it.
pub const ROLE: &str = "stratus-tenant";
/// How long the tenant token lives.
const TOKEN_SECONDS: i64 = 24 * 3600;

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let own = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        api_groups: own(groups),
        resources: own(resources),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of [`ROLE`].
pub fn tenant_rules() -> Vec<PolicyRule> {
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    vec![
        rule(
            &[stratus_dvp_api::GROUP],
            &[
                "virtualmachines",
                "virtualdisks",
                "virtualmachineblockdeviceattachments",
                "virtualmachineipaddresses",
                "virtualmachineoperations",
                "virtualimages",
            ],
            &all,
        ),
        rule(&[""], &["services", "secrets"], &all),
        rule(
            &["network.deckhouse.io"],
            &["servicewithhealthchecks"],
            &all,
        ),
    ]
}

/// Creates the namespace and the tenant's ServiceAccount bound to [`ROLE`] as `admin`; returns
/// a token of the ServiceAccount.
pub async fn create_tenant(admin: &kube::Client, namespace: &str, account: &str) -> Result<String> {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .with_context(|| format!("creating namespace {namespace}"))?;
    bind_account(admin, namespace, account, ROLE, tenant_rules()).await
}

/// Creates the ServiceAccount `account` in `namespace`, a Role `role` with `rules` bound to it,
/// and returns a token of the ServiceAccount.
pub async fn bind_account(
    admin: &kube::Client,
    namespace: &str,
    account: &str,
    role: &str,
    rules: Vec<PolicyRule>,
) -> Result<String> {
    let pp = PostParams::default();
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..ObjectMeta::default()
    };
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), namespace);
    accounts
        .create(
            &pp,
            &ServiceAccount {
                metadata: meta(account),
                ..ServiceAccount::default()
            },
        )
        .await
        .with_context(|| format!("creating ServiceAccount {account}"))?;
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(
            &pp,
            &Role {
                metadata: meta(role),
                rules: Some(rules),
            },
        )
        .await
        .with_context(|| format!("creating Role {role}"))?;
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(
            &pp,
            &RoleBinding {
                metadata: meta(role),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: role.into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: account.into(),
                    namespace: Some(namespace.into()),
                    ..Subject::default()
                }]),
            },
        )
        .await
        .with_context(|| format!("binding Role {role}"))?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request(account, &pp, &request)
        .await
        .with_context(|| format!("requesting a token for ServiceAccount {account}"))?;
    issued
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("the TokenRequest answer carries no token")
}

/// A kubeconfig for `server` with `token`, defaulting to `namespace`.
pub fn kubeconfig_yaml(server: &str, token: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: dvp
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: tenant
  user:
    token: {token}
contexts:
- name: dvp
  context:
    cluster: dvp
    user: tenant
    namespace: {namespace}
current-context: dvp
"
    )
}
