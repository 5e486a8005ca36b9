//! Delegated authorization: whether a user may use a non-resource path (`get /metrics`), or — as
//! kube-rbac-proxy's `resourceAttributes` — a fixed resource (`get deployments/prometheus-metrics`
//! of one Deployment), is asked of the Kubernetes API server (`authorization.k8s.io/v1`
//! SubjectAccessReview); answers are remembered briefly, allowed and denied each for their own
//! time.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus,
};
use kube::api::PostParams;
use kube::Api;
use tokio::sync::Semaphore;

use crate::authn::{User, CACHE_CAPACITY, CONCURRENT_REVIEWS, REVIEW_TIMEOUT};
use crate::ttl_cache::TtlCache;

/// The API server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allowed,
    /// Denied, or no authorizer had an opinion; with the API server's reason, if any.
    Denied(String),
}

/// How long answers are remembered (`--authorization-webhook-cache-*-ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionTtls {
    /// How long an allowed answer is kept.
    pub allowed: Duration,
    /// How long a denied answer is kept.
    pub denied: Duration,
}

/// What a request is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum AccessRule {
    /// The request's own path as a non-resource URL (the Kubernetes components' way).
    #[default]
    Path,
    /// One resource for every path (kube-rbac-proxy's `resourceAttributes`).
    Resource(ResourceRule),
}

/// The resource attributes every request is checked against; the verb comes from the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceRule {
    /// Namespace of the object.
    pub namespace: String,
    /// API group (`apps`).
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Resource (`deployments`).
    pub resource: String,
    /// Subresource (`prometheus-metrics`).
    pub subresource: String,
    /// Object name.
    pub name: String,
}

/// The review asking whether `user` may `verb` the non-resource `path`, or the rule's resource.
pub fn review_for(user: &User, path: &str, verb: &str, rule: &AccessRule) -> SubjectAccessReview {
    let (non_resource_attributes, resource_attributes) = match rule {
        AccessRule::Path => (
            Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            None,
        ),
        AccessRule::Resource(r) => {
            let some = |v: &str| Some(v.to_string()).filter(|v| !v.is_empty());
            (
                None,
                Some(ResourceAttributes {
                    namespace: some(&r.namespace),
                    group: some(&r.group),
                    version: some(&r.version),
                    resource: some(&r.resource),
                    subresource: some(&r.subresource),
                    name: some(&r.name),
                    verb: Some(verb.to_string()),
                    ..ResourceAttributes::default()
                }),
            )
        }
    };
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            non_resource_attributes,
            resource_attributes,
        },
        ..SubjectAccessReview::default()
    }
}

/// The decision a review status carries; an evaluation error without an allow is a denial.
pub fn decision_from_status(status: Option<&SubjectAccessReviewStatus>) -> Decision {
    match status {
        Some(s) if s.allowed && s.denied != Some(true) => Decision::Allowed,
        Some(s) => Decision::Denied(
            s.reason
                .clone()
                .or_else(|| s.evaluation_error.clone())
                .unwrap_or_default(),
        ),
        None => Decision::Denied(String::new()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    user: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    path: String,
    verb: String,
}

/// Asks SubjectAccessReviews.
pub struct Authorizer {
    api: Api<SubjectAccessReview>,
    rule: AccessRule,
    ttls: DecisionTtls,
    cache: Mutex<TtlCache<Key, Decision>>,
    slots: Semaphore,
}

impl Authorizer {
    /// An authorizer asking through `client` about paths, caching for `ttls`.
    pub fn new(client: kube::Client, ttls: DecisionTtls) -> Self {
        Self::with_rule(client, ttls, AccessRule::Path)
    }

    /// An authorizer asking through `client` under `rule`, caching for `ttls`.
    pub fn with_rule(client: kube::Client, ttls: DecisionTtls, rule: AccessRule) -> Self {
        Self {
            api: Api::all(client),
            rule,
            ttls,
            cache: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            slots: Semaphore::new(CONCURRENT_REVIEWS),
        }
    }

    /// Whether `user` may `verb` `path`. Errors are not remembered.
    pub async fn authorize(&self, user: &User, path: &str, verb: &str) -> anyhow::Result<Decision> {
        // Under a resource rule every path asks the same question.
        let path = match self.rule {
            AccessRule::Path => path,
            AccessRule::Resource(_) => "",
        };
        let key = Key {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            path: path.to_string(),
            verb: verb.to_string(),
        };
        if let Some(d) = self.cached(&key) {
            return Ok(d);
        }
        let _slot = self.slots.acquire().await.context("authorizer closed")?;
        if let Some(d) = self.cached(&key) {
            return Ok(d);
        }
        let created = tokio::time::timeout(
            REVIEW_TIMEOUT,
            self.api.create(
                &PostParams::default(),
                &review_for(user, path, verb, &self.rule),
            ),
        )
        .await
        .context("SubjectAccessReview: no answer in time")?
        .context("SubjectAccessReview")?;
        let decision = decision_from_status(created.status.as_ref());
        let ttl = match decision {
            Decision::Allowed => self.ttls.allowed,
            Decision::Denied(_) => self.ttls.denied,
        };
        self.lock()
            .insert(key, decision.clone(), ttl, Instant::now());
        Ok(decision)
    }

    fn cached(&self, key: &Key) -> Option<Decision> {
        self.lock().get(key, Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TtlCache<Key, Decision>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_names_the_user_and_the_path() {
        let user = User {
            name: "jane".into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::from([("scopes".to_string(), vec!["a".to_string()])]),
        };
        let spec = review_for(&user, "/metrics", "get", &AccessRule::Path).spec;
        assert_eq!(spec.user.as_deref(), Some("jane"));
        assert_eq!(spec.uid, None);
        assert_eq!(spec.groups, Some(vec!["system:authenticated".to_string()]));
        assert_eq!(spec.extra.unwrap()["scopes"], vec!["a".to_string()]);
        let attrs = spec.non_resource_attributes.unwrap();
        assert_eq!(attrs.path.as_deref(), Some("/metrics"));
        assert_eq!(attrs.verb.as_deref(), Some("get"));
        assert!(spec.resource_attributes.is_none());
    }

    #[test]
    fn a_resource_rule_asks_about_the_resource_with_the_request_verb() {
        let user = User {
            name: "prometheus".into(),
            ..User::default()
        };
        let rule = AccessRule::Resource(ResourceRule {
            namespace: "d8-cloud-provider-aws".into(),
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            subresource: "prometheus-metrics".into(),
            name: "cloud-data-discoverer".into(),
        });
        let spec = review_for(&user, "/metrics", "get", &rule).spec;
        assert!(spec.non_resource_attributes.is_none());
        let attrs = spec.resource_attributes.unwrap();
        assert_eq!(attrs.namespace.as_deref(), Some("d8-cloud-provider-aws"));
        assert_eq!(attrs.group.as_deref(), Some("apps"));
        assert_eq!(attrs.resource.as_deref(), Some("deployments"));
        assert_eq!(attrs.subresource.as_deref(), Some("prometheus-metrics"));
        assert_eq!(attrs.name.as_deref(), Some("cloud-data-discoverer"));
        assert_eq!(attrs.verb.as_deref(), Some("get"));
    }

    #[test]
    fn decisions() {
        let status = |allowed, denied, reason: Option<&str>, error: Option<&str>| {
            SubjectAccessReviewStatus {
                allowed,
                denied,
                reason: reason.map(str::to_string),
                evaluation_error: error.map(str::to_string),
            }
        };
        assert_eq!(
            decision_from_status(Some(&status(true, None, None, None))),
            Decision::Allowed
        );
        assert_eq!(
            decision_from_status(Some(&status(false, Some(true), Some("no"), None))),
            Decision::Denied("no".into())
        );
        assert_eq!(
            decision_from_status(Some(&status(false, None, None, Some("webhook down")))),
            Decision::Denied("webhook down".into())
        );
        assert_eq!(decision_from_status(None), Decision::Denied(String::new()));
    }
}
