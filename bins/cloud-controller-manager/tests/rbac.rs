//! Least privilege of the shipped ClusterRole (`deploy/rbac.yaml`, which `tests/chart.rs` keeps
//! equal to the chart's default `clusterRoleRules`), proven on a real kube-apiserver with
//! SubjectAccessReviews: every access the code makes is allowed, a list of things the CCM must
//! never do is denied, and removing any single verb of any rule denies at least one access the
//! code makes (so no rule is dead weight).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::Client;
use serde::Deserialize;
use stratus_scenarios::kube_fixture::{apply_rbac_manifest, repo_root};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::{Identity, TestEnv};

/// One access: `verb` on `resource` (`name/subresource` allowed) of API group `group`, in
/// `namespace` (None: cluster-scoped, or all namespaces for list/watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Access {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    namespace: Option<&'static str>,
    /// Where the code makes this call (or why it must be impossible).
    why: &'static str,
}

const fn access(
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
        why,
    }
}

/// Every Kubernetes API call the CCM makes, from the code (`crates/controllers/src`,
/// `bins/cloud-controller-manager/src`). Reads go through list+watch caches only: there is no
/// `get` of nodes or Services anywhere.
const REQUIRED: &[Access] = &[
    access("list", "", "nodes", None,
        "informer.rs: watcher(Api::<Node>::all) feeds every node controller (initial list, relists)"),
    access("watch", "", "nodes", None,
        "informer.rs: watcher(Api::<Node>::all)"),
    access("patch", "", "nodes", None,
        "node/driver.rs initialise (providerID, labels, taint removal); node_lifecycle/driver.rs \
         (shutdown taint); node_ipam/driver.rs write (spec.podCIDRs)"),
    access("delete", "", "nodes", None,
        "node_lifecycle/driver.rs check_node: nodes.delete of a node whose instance is gone"),
    access("patch", "", "nodes/status", None,
        "node/driver.rs patch_status (addresses); route/driver.rs patch_status (NetworkUnavailable)"),
    access("list", "", "services", None,
        "service/driver.rs: Controller::new(Api::<Service>::all) (initial list, relists)"),
    access("watch", "", "services", None,
        "service/driver.rs: Controller::new(Api::<Service>::all)"),
    access("patch", "", "services", Some("default"),
        "service/driver.rs ensure/cleanup: add and remove the load-balancer-cleanup finalizer"),
    access("patch", "", "services/status", Some("default"),
        "service/driver.rs: patch_status sets and clears status.loadBalancer.ingress"),
    access("create", "events.k8s.io", "events", Some("default"),
        "events.rs EventPublisher::publish -> kube Recorder: the first Event of a series"),
    access("patch", "events.k8s.io", "events", Some("default"),
        "events.rs EventPublisher::publish -> kube Recorder: repeats update the series"),
    // Leader election (--leader-elect) is being added in another branch; these three are the
    // only accesses this build does not make yet (client-go's lease lock: get, create, update).
    access("get", "coordination.k8s.io", "leases", Some("kube-system"),
        "leader election (pending): read the lock"),
    access("create", "coordination.k8s.io", "leases", Some("kube-system"),
        "leader election (pending): create the lock"),
    access("update", "coordination.k8s.io", "leases", Some("kube-system"),
        "leader election (pending): acquire and renew the lock"),
];

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
        "serviceaccounts/token",
        Some("kube-system"),
        "no token minting",
    ),
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

/// A rule the minimality variants carry besides the shipped ones: once it is allowed for a
/// variant's user, that variant's ClusterRole and binding are in the apiserver's RBAC cache.
fn sentinel_rule() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        resource_names: Some(vec!["stratus-rbac-sentinel".into()]),
        verbs: vec!["get".into()],
        ..PolicyRule::default()
    }
}

fn sentinel_access() -> ResourceAttributes {
    ResourceAttributes {
        verb: Some("get".into()),
        group: Some(String::new()),
        resource: Some("configmaps".into()),
        name: Some("stratus-rbac-sentinel".into()),
        namespace: Some("default".into()),
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

/// The rules of the ClusterRole in `deploy/rbac.yaml`.
fn shipped_rules() -> Vec<PolicyRule> {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml")).unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .find(|v| v["kind"].as_str() == Some("ClusterRole"))
        .expect("deploy/rbac.yaml has a ClusterRole");
    let role: ClusterRole = serde_yaml::from_value(role).unwrap();
    role.rules.unwrap_or_default()
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
    let rules = shipped_rules();
    for rule in &rules {
        let all = [&rule.api_groups, &rule.resources, &Some(rule.verbs.clone())];
        assert!(
            all.iter()
                .all(|l| !l.as_deref().unwrap_or_default().iter().any(|x| x == "*")),
            "wildcards defeat least privilege: {rule:?}"
        );
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
    }
    let mut variants = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for verb in &rule.verbs {
            let mut variant = rules.clone();
            variant[i].verbs.retain(|v| v != verb);
            if variant[i].verbs.is_empty() {
                variant.remove(i);
            }
            variant.push(sentinel_rule());
            let name = format!("stratus-minimality-{}", variants.len());
            create_bound_role(&admin, &name, variant).await;
            variants.push((name, i, verb.clone()));
        }
    }

    for (user, i, verb) in &variants {
        let who = Who::user(user);
        wait_for(
            &format!("{user}'s role to take effect"),
            RBAC_WAIT,
            || async {
                Ok(allowed(&admin, &who, sentinel_access())
                    .await?
                    .then_some(()))
            },
        )
        .await
        .unwrap();
        let denied = denied_required(&admin, &who).await.unwrap();
        let rule = &rules[*i];
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

/// Creates ClusterRole `name` with `rules` and binds it to the user `name`.
async fn create_bound_role(admin: &Client, name: &str, rules: Vec<PolicyRule>) {
    let pp = PostParams::default();
    let meta = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &pp,
            &ClusterRole {
                metadata: meta.clone(),
                rules: Some(rules),
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
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: name.into(),
                },
                subjects: Some(vec![Subject {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "User".into(),
                    name: name.into(),
                    namespace: None,
                }]),
            },
        )
        .await
        .expect("create variant ClusterRoleBinding");
}
