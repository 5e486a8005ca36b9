//! Least privilege of the shipped ClusterRole and kube-system Role (`deploy/rbac.yaml`, which
//! `tests/chart.rs` keeps equal to the chart's default `clusterRoleRules`/`kubeSystemRoleRules`), proven on a real kube-apiserver with
//! SubjectAccessReviews: every access the code makes is allowed, a list of things the CCM must
//! never do is denied, and removing any single verb of any rule denies at least one access the
//! code makes (so no rule is dead weight).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::Client;
use serde::Deserialize;
use stratus_scenarios::kube_fixture::{apply_rbac_manifest, repo_root};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::{Identity, TestEnv};

use stratus_testenv::rbac_required::{access, Access, REQUIRED};

/// What the CCM must not be able to do.
const FORBIDDEN: &[Access] = &[
    access("get", "", "nodes", None, "reads come from the watch cache"),
    access("create", "", "nodes", None, "kubelets register nodes"),
    access(
        "update",
        "",
        "nodes",
        None,
        "only merge patches (no whole-object PUT)",
    ),
    access(
        "deletecollection",
        "",
        "nodes",
        None,
        "nodes are deleted one by one",
    ),
    access(
        "update",
        "",
        "nodes/status",
        None,
        "only merge/strategic patches",
    ),
    access(
        "get",
        "",
        "services",
        Some("default"),
        "reads come from the watch cache",
    ),
    access(
        "create",
        "",
        "services",
        Some("default"),
        "never creates Services",
    ),
    access(
        "update",
        "",
        "services",
        Some("default"),
        "only merge patches",
    ),
    access(
        "patch",
        "",
        "services",
        Some("default"),
        "finalizers go through the status subresource: Service specs are never written",
    ),
    access(
        "delete",
        "",
        "services",
        Some("default"),
        "never deletes Services",
    ),
    access(
        "update",
        "",
        "services/status",
        Some("default"),
        "only merge patches",
    ),
    access("get", "", "secrets", Some("kube-system"), "no secrets"),
    access("list", "", "secrets", None, "no secrets"),
    access(
        "get",
        "",
        "configmaps",
        Some("kube-system"),
        "no configmaps",
    ),
    access("create", "", "pods", Some("default"), "no workloads"),
    access("delete", "", "pods", Some("kube-system"), "no workloads"),
    access(
        "create",
        "",
        "events",
        Some("default"),
        "Events go through events.k8s.io only",
    ),
    access(
        "update",
        "events.k8s.io",
        "events",
        Some("default"),
        "the Recorder patches",
    ),
    access(
        "delete",
        "events.k8s.io",
        "events",
        Some("default"),
        "Events are never deleted",
    ),
    access(
        "delete",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "locks are not deleted",
    ),
    access(
        "list",
        "coordination.k8s.io",
        "leases",
        None,
        "the lock is read by name",
    ),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some("default"),
        "Leases outside kube-system are not ours",
    ),
    access(
        "create",
        "",
        "serviceaccounts/token",
        Some("default"),
        "tokens only for kube-system controller accounts",
    ),
    access("list", "", "secrets", Some("kube-system"), "no Secrets"),
    access(
        "create",
        "",
        "persistentvolumes",
        None,
        "no volumes (upstream's chart grants some)",
    ),
    access(
        "create",
        "",
        "endpoints",
        Some("default"),
        "no endpoints (upstream's chart grants)",
    ),
    access(
        "bind",
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "no privilege escalation",
    ),
    access(
        "escalate",
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "no escalation",
    ),
    access("impersonate", "", "users", None, "no impersonation"),
];

/// A rule the minimality variants carry besides the shipped ones (in the ClusterRole, and in the
/// kube-system Role): once both are allowed for a variant's user, that variant's roles and
/// bindings are in the apiserver's RBAC cache.
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

fn sentinel_access(name: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some("get".into()),
        group: Some(String::new()),
        resource: Some("configmaps".into()),
        name: Some(name.into()),
        namespace: Some("kube-system".into()),
        ..ResourceAttributes::default()
    }
}

fn attributes(a: &Access) -> ResourceAttributes {
    let (resource, subresource) = match a.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (a.resource, None),
    };
    ResourceAttributes {
        verb: Some(a.verb.into()),
        group: Some(a.group.into()),
        resource: Some(resource.into()),
        subresource,
        namespace: a.namespace.map(Into::into),
        ..ResourceAttributes::default()
    }
}

/// Who a review is about.
struct Who {
    user: String,
    groups: Vec<String>,
}

impl Who {
    fn ccm() -> Who {
        let id = Identity::CloudControllerManager;
        Who {
            user: id.username().into(),
            groups: id.groups().iter().map(|g| g.to_string()).collect(),
        }
    }

    fn user(name: &str) -> Who {
        Who {
            user: name.into(),
            groups: vec!["system:authenticated".into()],
        }
    }
}

async fn allowed(admin: &Client, who: &Who, attrs: ResourceAttributes) -> anyhow::Result<bool> {
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

/// The REQUIRED accesses `who` is denied.
async fn denied_required(admin: &Client, who: &Who) -> anyhow::Result<Vec<Access>> {
    let mut denied = Vec::new();
    for a in REQUIRED {
        if !allowed(admin, who, attributes(a)).await? {
            denied.push(*a);
        }
    }
    Ok(denied)
}

/// The rules of the ClusterRole and of the kube-system Role in `deploy/rbac.yaml`.
fn shipped_rules() -> Shipped {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml")).unwrap();
    let find = |kind: &str| {
        serde_yaml::Deserializer::from_str(&text)
            .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
            .find(|v| v["kind"].as_str() == Some(kind))
            .unwrap_or_else(|| panic!("deploy/rbac.yaml has a {kind}"))
    };
    let cluster: ClusterRole = serde_yaml::from_value(find("ClusterRole")).unwrap();
    let role: Role = serde_yaml::from_value(find("Role")).unwrap();
    assert_eq!(role.metadata.namespace.as_deref(), Some("kube-system"));
    Shipped {
        cluster: cluster.rules.unwrap_or_default(),
        kube_system: role.rules.unwrap_or_default(),
    }
}

/// The shipped rules: cluster-wide, and namespaced to kube-system.
#[derive(Clone)]
struct Shipped {
    cluster: Vec<PolicyRule>,
    kube_system: Vec<PolicyRule>,
}

impl Shipped {
    /// Each (in_role, index, rule) of both lists.
    fn each(&self) -> impl Iterator<Item = (bool, usize, &PolicyRule)> {
        let cluster = self.cluster.iter().enumerate().map(|(i, r)| (false, i, r));
        let role = self
            .kube_system
            .iter()
            .enumerate()
            .map(|(i, r)| (true, i, r));
        cluster.chain(role)
    }

    /// These rules without `verb` in rule `i` of the Role (`in_role`) or the ClusterRole.
    fn without(&self, in_role: bool, i: usize, verb: &str) -> Shipped {
        let mut variant = self.clone();
        let list = if in_role {
            &mut variant.kube_system
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

fn covers(rule: &PolicyRule, a: &Access) -> bool {
    let has = |list: &Option<Vec<String>>, item: &str| {
        list.as_deref()
            .unwrap_or_default()
            .iter()
            .any(|x| x == item)
    };
    has(&rule.api_groups, a.group) && has(&rule.resources, a.resource)
}

const RBAC_WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn shipped_cluster_role_is_exactly_what_the_code_needs() {
    let env = TestEnv::start().await.expect("test environment");
    let admin = env
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    apply_rbac_manifest(&admin, &repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply deploy/rbac.yaml");
    let ccm = Who::ccm();

    // Every access the code makes is allowed (waiting out the RBAC cache).
    wait_for(
        "the CCM to be allowed every required access",
        RBAC_WAIT,
        || async {
            let denied = denied_required(&admin, &ccm).await?;
            anyhow::ensure!(denied.is_empty(), "denied: {denied:#?}");
            Ok(Some(()))
        },
    )
    .await
    .unwrap();

    // What it must never do is denied.
    let mut wrongly_allowed = Vec::new();
    for a in FORBIDDEN {
        if allowed(&admin, &ccm, attributes(a)).await.unwrap() {
            wrongly_allowed.push(a);
        }
    }
    assert!(
        wrongly_allowed.is_empty(),
        "the CCM may: {wrongly_allowed:#?}"
    );

    // The reviews are about the identity the CCM really authenticates as.
    let as_ccm = env
        .kube_client(Identity::CloudControllerManager)
        .await
        .expect("CCM client");
    Api::<Node>::all(as_ccm.clone())
        .list(&ListParams::default())
        .await
        .expect("the CCM lists nodes");
    for denied in [
        Api::<Node>::all(as_ccm.clone())
            .get("any")
            .await
            .map(|_| ()),
        Api::<Secret>::namespaced(as_ccm, "kube-system")
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403),
            "{denied:?}"
        );
    }

    // Minimality: one variant of the role per (rule, verb), without that verb, each bound to a
    // user of its own. Created at once, then checked one by one.
    let shipped = shipped_rules();
    for (_, _, rule) in shipped.each() {
        let all = [&rule.api_groups, &rule.resources, &Some(rule.verbs.clone())];
        assert!(
            all.iter()
                .all(|l| !l.as_deref().unwrap_or_default().iter().any(|x| x == "*")),
            "wildcards defeat least privilege: {rule:?}"
        );
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
    }
    let mut variants = Vec::new();
    for (in_role, i, rule) in shipped.each() {
        for verb in &rule.verbs {
            let variant = shipped.without(in_role, i, verb);
            let name = format!("stratus-minimality-{}", variants.len());
            create_bound_roles(&admin, &name, variant).await;
            variants.push((name, in_role, i, verb.clone(), rule.clone()));
        }
    }

    for (user, in_role, i, verb, rule) in &variants {
        let who = Who::user(user);
        wait_for(
            &format!("{user}'s roles to take effect"),
            RBAC_WAIT,
            || async {
                let cluster = allowed(&admin, &who, sentinel_access(CLUSTER_SENTINEL)).await?;
                let role = allowed(&admin, &who, sentinel_access(ROLE_SENTINEL)).await?;
                Ok((cluster && role).then_some(()))
            },
        )
        .await
        .unwrap();
        let denied = denied_required(&admin, &who).await.unwrap();
        let i = format!("{}{i}", if *in_role { "role:" } else { "cluster:" });
        assert!(
            !denied.is_empty(),
            "removing {verb:?} from rule {i} ({:?} {:?}) denies nothing the code does: the \
             verb is not needed (drop it from deploy/rbac.yaml and the chart) or REQUIRED misses \
             the call that needs it",
            rule.api_groups,
            rule.resources
        );
        for a in &denied {
            assert!(
                a.verb == verb && covers(rule, a),
                "removing {verb:?} from rule {i} denied an unrelated access {a:?}"
            );
        }
    }
}

/// Creates ClusterRole `name` and kube-system Role `name` with `rules` (plus a sentinel rule
/// each) and binds both to the user `name`.
async fn create_bound_roles(admin: &Client, name: &str, rules: Shipped) {
    let pp = PostParams::default();
    let meta = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    let namespaced = ObjectMeta {
        namespace: Some("kube-system".into()),
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
    let mut kube_system = rules.kube_system;
    kube_system.push(sentinel_rule(ROLE_SENTINEL));
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
        .expect("create variant ClusterRole");
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
        .expect("create variant ClusterRoleBinding");
    Api::<Role>::namespaced(admin.clone(), "kube-system")
        .create(
            &pp,
            &Role {
                metadata: namespaced.clone(),
                rules: Some(kube_system),
            },
        )
        .await
        .expect("create variant Role");
    Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
        .create(
            &pp,
            &RoleBinding {
                metadata: namespaced,
                role_ref: role_ref("Role"),
                subjects,
            },
        )
        .await
        .expect("create variant RoleBinding");
}
