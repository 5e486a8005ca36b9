//! Least-privilege proofs for shipped RBAC on a real kube-apiserver, with SubjectAccessReviews:
//! every access the code makes is allowed, accesses it must never have are denied, and removing
//! any single verb of any rule denies at least one access the code makes (no rule is dead weight).

use std::time::Duration;

use anyhow::{ensure, Context};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use serde::Deserialize;

/// How long RBAC changes may take to reach the apiserver's authorizer cache.
const RBAC_WAIT: Duration = Duration::from_secs(30);

/// One access: `verb` on `resource` (`resource/subresource` allowed) of API group `group`, in
/// `namespace` (None: cluster-scoped, or all namespaces for list/watch), optionally of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The verb (`get`, `list`, `patch`...).
    pub verb: &'static str,
    /// The API group (`""` for core).
    pub group: &'static str,
    /// The resource, `resource/subresource` for a subresource.
    pub resource: &'static str,
    /// The namespace; None for cluster scope or all namespaces.
    pub namespace: Option<&'static str>,
    /// One object's name; None for any.
    pub name: Option<&'static str>,
    /// Where the code makes this call (or why it must be impossible).
    pub why: &'static str,
}

/// An access to any object of `resource`.
pub const fn access(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    namespace: Option<&'static str>,
    why: &'static str,
) -> Access {
    Access {
        verb,
        group,
        resource,
        namespace,
        name: None,
        why,
    }
}

impl Access {
    /// This access, limited to the object `name`.
    pub const fn named(self, name: &'static str) -> Access {
        Access {
            name: Some(name),
            ..self
        }
    }

    fn attributes(&self) -> ResourceAttributes {
        let (resource, subresource) = match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_string())),
            None => (self.resource, None),
        };
        ResourceAttributes {
            verb: Some(self.verb.into()),
            group: Some(self.group.into()),
            resource: Some(resource.into()),
            subresource,
            namespace: self.namespace.map(Into::into),
            name: self.name.map(Into::into),
            ..ResourceAttributes::default()
        }
    }

    /// Whether `rule` names this access's group and resource.
    fn covered_by(&self, rule: &PolicyRule) -> bool {
        let has = |list: &Option<Vec<String>>, item: &str| {
            list.as_deref()
                .unwrap_or_default()
                .iter()
                .any(|x| x == item)
        };
        has(&rule.api_groups, self.group) && has(&rule.resources, self.resource)
    }
}

/// Who a review is about: a user and its groups.
#[derive(Debug, Clone)]
pub struct Who {
    /// The user name.
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

impl Who {
    /// An authenticated user with no groups besides `system:authenticated`.
    pub fn user(name: &str) -> Who {
        Who {
            user: name.into(),
            groups: vec!["system:authenticated".into()],
        }
    }

    /// The ServiceAccount `namespace/name`, as its token authenticates.
    pub fn service_account(namespace: &str, name: &str) -> Who {
        Who {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

/// Whether `who` may do `access`, by a SubjectAccessReview.
pub async fn allowed(admin: &Client, who: &Who, access: &Access) -> anyhow::Result<bool> {
    review(admin, who, access.attributes()).await
}

async fn review(admin: &Client, who: &Who, attrs: ResourceAttributes) -> anyhow::Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(who.user.clone()),
            groups: Some(who.groups.clone()),
            resource_attributes: Some(attrs),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

/// The accesses of `list` whose answer for `who` is not `want`.
async fn wrong(
    admin: &Client,
    who: &Who,
    list: &[Access],
    want: bool,
) -> anyhow::Result<Vec<Access>> {
    let mut wrong = Vec::new();
    for a in list {
        if allowed(admin, who, a).await? != want {
            wrong.push(*a);
        }
    }
    Ok(wrong)
}

/// Polls (the authorizer cache is asynchronous) until `check` yields a value, for [`RBAC_WAIT`].
async fn poll<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Result<T, String>>>,
{
    let deadline = tokio::time::Instant::now() + RBAC_WAIT;
    loop {
        let last = match check().await? {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {RBAC_WAIT:?} waiting for {what}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The shipped rules: a ClusterRole's and a Role's (in `namespace`), from one manifest.
#[derive(Debug, Clone)]
pub struct ShippedRbac {
    /// The ClusterRole's rules.
    pub cluster: Vec<PolicyRule>,
    /// The Role's rules.
    pub namespaced: Vec<PolicyRule>,
    /// The Role's namespace.
    pub namespace: String,
}

impl ShippedRbac {
    /// The ClusterRole and the Role of a multi-document manifest (exactly one each; other kinds
    /// are ignored).
    pub fn from_manifest(text: &str) -> anyhow::Result<ShippedRbac> {
        let mut cluster = None;
        let mut role = None;
        for doc in serde_yaml::Deserializer::from_str(text) {
            let value = serde_yaml::Value::deserialize(doc)?;
            let kind = value["kind"].as_str().unwrap_or_default().to_string();
            let slot_taken = match kind.as_str() {
                "ClusterRole" => cluster
                    .replace(serde_yaml::from_value::<ClusterRole>(value)?)
                    .is_some(),
                "Role" => role
                    .replace(serde_yaml::from_value::<Role>(value)?)
                    .is_some(),
                _ => false,
            };
            ensure!(!slot_taken, "the manifest has more than one {kind}");
        }
        let cluster = cluster.context("the manifest has no ClusterRole")?;
        let role = role.context("the manifest has no Role")?;
        Ok(ShippedRbac {
            cluster: cluster.rules.unwrap_or_default(),
            namespace: role
                .metadata
                .namespace
                .context("the Role has no namespace")?,
            namespaced: role.rules.unwrap_or_default(),
        })
    }

    /// Each (in_role, index, rule) of both lists.
    fn each(&self) -> impl Iterator<Item = (bool, usize, &PolicyRule)> {
        let cluster = self.cluster.iter().enumerate().map(|(i, r)| (false, i, r));
        let role = self
            .namespaced
            .iter()
            .enumerate()
            .map(|(i, r)| (true, i, r));
        cluster.chain(role)
    }

    /// These rules without `verb` in rule `i` of the Role (`in_role`) or of the ClusterRole.
    fn without(&self, in_role: bool, i: usize, verb: &str) -> ShippedRbac {
        let mut variant = self.clone();
        let list = if in_role {
            &mut variant.namespaced
        } else {
            &mut variant.cluster
        };
        list[i].verbs.retain(|v| v != verb);
        if list[i].verbs.is_empty() {
            list.remove(i);
        }
        variant
    }
}

/// What a least-privilege proof checks: `who` holds `rbac` (bound by the caller), needs every
/// access of `required` and must have none of `forbidden`.
pub struct LeastPrivilege<'a> {
    /// The identity the component runs as.
    pub who: Who,
    /// The shipped rules bound to `who`.
    pub rbac: ShippedRbac,
    /// Every Kubernetes API call the code makes.
    pub required: &'a [Access],
    /// What it must never be able to do.
    pub forbidden: &'a [Access],
    /// Prefix of the variant roles' and users' names (unique per test cluster).
    pub variant_prefix: &'a str,
}

impl LeastPrivilege<'_> {
    /// Proves it: required allowed, forbidden denied, no wildcard, and each (rule, verb) needed —
    /// a variant of the roles without that verb, bound to a user of its own, is denied at least
    /// one required access, and only accesses that rule covers with that verb.
    pub async fn prove(&self, admin: &Client) -> anyhow::Result<()> {
        poll("every required access to be allowed", || async {
            let denied = wrong(admin, &self.who, self.required, true).await?;
            Ok(if denied.is_empty() {
                Ok(())
            } else {
                Err(format!("denied: {denied:#?}"))
            })
        })
        .await?;
        let wrongly_allowed = wrong(admin, &self.who, self.forbidden, false).await?;
        ensure!(
            wrongly_allowed.is_empty(),
            "{} may: {wrongly_allowed:#?}",
            self.who.user
        );

        for (_, _, rule) in self.rbac.each() {
            let lists = [&rule.api_groups, &rule.resources, &Some(rule.verbs.clone())];
            ensure!(
                lists
                    .iter()
                    .all(|l| !l.as_deref().unwrap_or_default().iter().any(|x| x == "*")),
                "wildcards defeat least privilege: {rule:?}"
            );
            ensure!(
                rule.non_resource_urls.is_none(),
                "non-resource URLs: {rule:?}"
            );
        }
        let mut variants = Vec::new();
        for (in_role, i, rule) in self.rbac.each() {
            for verb in &rule.verbs {
                let name = format!("{}-{}", self.variant_prefix, variants.len());
                let variant = self.rbac.without(in_role, i, verb);
                create_bound_roles(admin, &name, variant).await?;
                variants.push((name, in_role, i, verb.clone(), rule.clone()));
            }
        }
        for (user, in_role, i, verb, rule) in &variants {
            let who = Who::user(user);
            poll(&format!("{user}'s roles to take effect"), || async {
                let cluster =
                    review(admin, &who, sentinel_access(CLUSTER_SENTINEL, &self.rbac)).await?;
                let role = review(admin, &who, sentinel_access(ROLE_SENTINEL, &self.rbac)).await?;
                Ok(if cluster && role {
                    Ok(())
                } else {
                    Err(format!("sentinels allowed: cluster {cluster}, role {role}"))
                })
            })
            .await?;
            let denied = wrong(admin, &who, self.required, true).await?;
            let i = format!("{}{i}", if *in_role { "role:" } else { "cluster:" });
            ensure!(
                !denied.is_empty(),
                "removing {verb:?} from rule {i} ({:?} {:?}) denies nothing the code does: the \
                 verb is not needed (drop it from the shipped RBAC and the chart) or the required \
                 list misses the call that needs it",
                rule.api_groups,
                rule.resources
            );
            for a in &denied {
                ensure!(
                    a.verb == verb && a.covered_by(rule),
                    "removing {verb:?} from rule {i} denied an unrelated access {a:?}"
                );
            }
        }
        Ok(())
    }
}

/// A rule each variant carries besides the shipped ones (in the ClusterRole, and in the Role):
/// once both are allowed for a variant's user, that variant's roles and bindings are in the
/// apiserver's RBAC cache.
fn sentinel_rule(name: &str) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        resource_names: Some(vec![name.into()]),
        verbs: vec!["get".into()],
        ..PolicyRule::default()
    }
}

const CLUSTER_SENTINEL: &str = "stratus-rbac-sentinel";
const ROLE_SENTINEL: &str = "stratus-rbac-role-sentinel";

fn sentinel_access(name: &str, rbac: &ShippedRbac) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some("get".into()),
        group: Some(String::new()),
        resource: Some("configmaps".into()),
        name: Some(name.into()),
        namespace: Some(rbac.namespace.clone()),
        ..ResourceAttributes::default()
    }
}

/// Creates ClusterRole `name` and Role `name` with `rules` (plus a sentinel rule each) and binds
/// both to the user `name`.
async fn create_bound_roles(admin: &Client, name: &str, rules: ShippedRbac) -> anyhow::Result<()> {
    let pp = PostParams::default();
    let meta = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    let namespaced = ObjectMeta {
        namespace: Some(rules.namespace.clone()),
        ..meta.clone()
    };
    let role_ref = |kind: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    };
    let subjects = Some(vec![Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: "User".into(),
        name: name.into(),
        namespace: None,
    }]);
    let mut cluster = rules.cluster;
    cluster.push(sentinel_rule(CLUSTER_SENTINEL));
    let mut namespaced_rules = rules.namespaced;
    namespaced_rules.push(sentinel_rule(ROLE_SENTINEL));
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &pp,
            &ClusterRole {
                metadata: meta.clone(),
                rules: Some(cluster),
                ..ClusterRole::default()
            },
        )
        .await
        .context("create variant ClusterRole")?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &pp,
            &ClusterRoleBinding {
                metadata: meta,
                role_ref: role_ref("ClusterRole"),
                subjects: subjects.clone(),
            },
        )
        .await
        .context("create variant ClusterRoleBinding")?;
    Api::<Role>::namespaced(admin.clone(), &rules.namespace)
        .create(
            &pp,
            &Role {
                metadata: namespaced.clone(),
                rules: Some(namespaced_rules),
            },
        )
        .await
        .context("create variant Role")?;
    Api::<RoleBinding>::namespaced(admin.clone(), &rules.namespace)
        .create(
            &pp,
            &RoleBinding {
                metadata: namespaced,
                role_ref: role_ref("Role"),
                subjects,
            },
        )
        .await
        .context("create variant RoleBinding")?;
    Ok(())
}
