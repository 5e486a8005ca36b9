//! The Helm chart (`charts/cloud-controller-manager`), checked with the real helm CLI built by
//! `testenv install`: it lints, renders the expected objects with the default values and with
//! the RKE documentation's values, rejects bad values through its schema, its default
//! ClusterRole is exactly the one in `deploy/rbac.yaml`, and it installs into (and uninstalls
//! from) a real kube-apiserver, where its delegated-auth bindings take effect.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount, Toleration};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use stratus_scenarios::kube_fixture::repo_root;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::{Identity, TestEnv};

/// The values file of the RKE documentation ("Using the Out-of-Tree AWS Cloud Provider for
/// RKE"), as users copy it for the upstream chart.
const RKE_VALUES: &str = r#"
hostNetworking: true
tolerations:
  - effect: NoSchedule
    key: node.cloudprovider.kubernetes.io/uninitialized
    value: 'true'
  - effect: NoSchedule
    value: 'true'
    key: node-role.kubernetes.io/controlplane
nodeSelector:
  node-role.kubernetes.io/controlplane: 'true'
args:
  - --configure-cloud-routes=false
  - --use-service-account-credentials=true
  - --v=2
  - --cloud-provider=aws
clusterRoleRules:
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch, update]
  - apiGroups: [""]
    resources: [nodes]
    verbs: ['*']
  - apiGroups: [""]
    resources: [nodes/status]
    verbs: [patch]
  - apiGroups: [""]
    resources: [services]
    verbs: [list, patch, update, watch]
  - apiGroups: [""]
    resources: [services/status]
    verbs: [list, patch, update, watch]
  - apiGroups: ['']
    resources: [serviceaccounts]
    verbs: [create, get]
  - apiGroups: [""]
    resources: [persistentvolumes]
    verbs: [get, list, update, watch]
  - apiGroups: [""]
    resources: [endpoints]
    verbs: [create, get, list, watch, update]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create, get, list, watch, update]
  - apiGroups: [""]
    resources: [serviceaccounts/token]
    verbs: [create]
"#;

fn chart_dir() -> PathBuf {
    repo_root().join("charts/cloud-controller-manager")
}

fn helm() -> PathBuf {
    stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm
}

/// Writes `contents` to a values file unique to `name` and returns its path.
fn values_file(name: &str, contents: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("chart-values-{}-{name}.yaml", std::process::id()));
    std::fs::write(&path, contents).expect("write values file");
    path
}

/// Runs helm with `args`; `Ok(stdout)` on success, `Err(stdout + stderr)` on failure.
fn run_helm(args: &[&str]) -> Result<String, String> {
    let out = Command::new(helm())
        .args(args)
        // No user configuration or repositories leak in.
        .env("HELM_CONFIG_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_CACHE_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run helm");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr).into_owned()
        ))
    }
}

/// The objects `helm template` renders with the values file (if any).
fn render(values: Option<&Path>) -> Result<Vec<serde_yaml::Value>, String> {
    let chart = chart_dir();
    let mut args = vec!["template", "stratus", chart.to_str().unwrap()];
    if let Some(v) = values {
        args.extend(["--values", v.to_str().unwrap()]);
    }
    Ok(documents(&run_helm(&args)?))
}

fn render_with(name: &str, values: &str) -> Result<Vec<serde_yaml::Value>, String> {
    render(Some(&values_file(name, values)))
}

fn documents(text: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde_yaml::Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kind_of(v: &serde_yaml::Value) -> &str {
    v["kind"].as_str().unwrap_or_default()
}

/// (kind, namespace, name) of every object, sorted.
fn inventory(objects: &[serde_yaml::Value]) -> Vec<(String, String, String)> {
    let mut all: Vec<_> = objects
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            (
                kind_of(o).to_string(),
                meta["namespace"].as_str().unwrap_or_default().to_string(),
                meta["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    all.sort();
    all
}

/// The only object of `kind` named `name` (any kind when several of a kind exist), typed.
fn one<T: DeserializeOwned>(objects: &[serde_yaml::Value], kind: &str, name: Option<&str>) -> T {
    let found: Vec<_> = objects
        .iter()
        .filter(|o| kind_of(o) == kind)
        .filter(|o| name.is_none_or(|n| o["metadata"]["name"].as_str() == Some(n)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} {name:?}, found {found:?}"
    );
    serde_yaml::from_value(found[0].clone())
        .unwrap_or_else(|e| panic!("rendered {kind} is not a valid {kind}: {e}"))
}

/// The objects of `deploy/rbac.yaml`.
fn deploy_rbac() -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml")).unwrap();
    documents(&text)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn chart_lints_with_default_and_rke_values() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let out = run_helm(&["lint", "--strict", chart]).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let rke = values_file("lint-rke", RKE_VALUES);
    run_helm(&["lint", "--strict", chart, "--values", rke.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn default_values_render_the_ccm_daemonset_and_its_rbac() {
    let objects = render(None).unwrap_or_else(|e| panic!("{e}"));
    let sys = "kube-system".to_string();
    let expected: Vec<(String, String, String)> = vec![
        (
            "ClusterRole".into(),
            String::new(),
            "system:stratus-cloud-controller-manager".into(),
        ),
        (
            "ClusterRoleBinding".into(),
            String::new(),
            "cloud-controller-manager:auth-delegator".into(),
        ),
        (
            "ClusterRoleBinding".into(),
            String::new(),
            "system:stratus-cloud-controller-manager".into(),
        ),
        (
            "DaemonSet".into(),
            sys.clone(),
            "aws-cloud-controller-manager".into(),
        ),
        (
            "Role".into(),
            sys.clone(),
            "system:stratus-cloud-controller-manager".into(),
        ),
        (
            "RoleBinding".into(),
            sys.clone(),
            "cloud-controller-manager:apiserver-authentication-reader".into(),
        ),
        (
            "RoleBinding".into(),
            sys.clone(),
            "system:stratus-cloud-controller-manager".into(),
        ),
        (
            "ServiceAccount".into(),
            sys.clone(),
            "cloud-controller-manager".into(),
        ),
    ];
    assert_eq!(inventory(&objects), expected);

    let ds: DaemonSet = one(&objects, "DaemonSet", None);
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("cloud-controller-manager")
    );
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    let selector = pod.node_selector.unwrap_or_default();
    assert_eq!(
        selector.get("node-role.kubernetes.io/control-plane"),
        Some(&String::new())
    );
    let tolerations = pod.tolerations.unwrap_or_default();
    assert!(
        tolerations.iter().any(|t| t.key.as_deref()
            == Some("node.cloudprovider.kubernetes.io/uninitialized")
            && t.effect.as_deref() == Some("NoSchedule")),
        "{tolerations:?}"
    );
    assert!(pod.volumes.is_none(), "no cloud config, no volume");
    let [container] = pod.containers.as_slice() else {
        panic!("one container expected");
    };
    assert_eq!(
        container.image.as_deref(),
        Some("ghcr.io/stratus/cloud-controller-manager:0.1.0"),
        "the tag defaults to the appVersion"
    );
    assert_eq!(
        container.args,
        Some(strings(&["--v=2", "--cloud-provider=aws"]))
    );
    assert!(container.env.is_none());
    let probe = container
        .liveness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .expect("liveness probe over HTTP(S)");
    assert_eq!(probe.path.as_deref(), Some("/healthz"));
    assert_eq!(probe.scheme.as_deref(), Some("HTTPS"));
    assert_eq!(
        probe.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(10258)
    );
    let ports = container.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].container_port, 10258);

    // Delegated authn/authz of the secure port.
    let delegator: ClusterRoleBinding = one(
        &objects,
        "ClusterRoleBinding",
        Some("cloud-controller-manager:auth-delegator"),
    );
    assert_eq!(delegator.role_ref.kind, "ClusterRole");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    let kube_system: RoleBinding = one(
        &objects,
        "RoleBinding",
        Some("system:stratus-cloud-controller-manager"),
    );
    let reader: RoleBinding = one(
        &objects,
        "RoleBinding",
        Some("cloud-controller-manager:apiserver-authentication-reader"),
    );
    assert_eq!(
        reader.role_ref.name,
        "extension-apiserver-authentication-reader"
    );
    assert_eq!(kube_system.role_ref.kind, "Role");
    assert_eq!(
        kube_system.role_ref.name,
        "system:stratus-cloud-controller-manager"
    );
    let readiness = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .expect("readiness probe over HTTP(S)");
    assert_eq!(readiness.path.as_deref(), Some("/readyz"));
    for subjects in [delegator.subjects, kube_system.subjects] {
        let subjects = subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, "cloud-controller-manager");
        assert_eq!(subjects[0].namespace.as_deref(), Some("kube-system"));
    }
}

#[test]
fn rke_documentation_values_render() {
    let objects = render_with("rke", RKE_VALUES).unwrap_or_else(|e| panic!("{e}"));
    let ds: DaemonSet = one(&objects, "DaemonSet", None);
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(
        pod.node_selector.unwrap_or_default(),
        [(
            "node-role.kubernetes.io/controlplane".to_string(),
            "true".to_string()
        )]
        .into()
    );
    let toleration = |key: &str| Toleration {
        key: Some(key.into()),
        value: Some("true".into()),
        effect: Some("NoSchedule".into()),
        ..Toleration::default()
    };
    assert_eq!(
        pod.tolerations,
        Some(vec![
            toleration("node.cloudprovider.kubernetes.io/uninitialized"),
            toleration("node-role.kubernetes.io/controlplane"),
        ])
    );
    assert_eq!(
        pod.containers[0].args,
        Some(strings(&[
            "--configure-cloud-routes=false",
            "--use-service-account-credentials=true",
            "--v=2",
            "--cloud-provider=aws",
        ]))
    );
    // Their clusterRoleRules replace the default whole, as upstream.
    let role: ClusterRole = one(&objects, "ClusterRole", None);
    let rules = role.rules.unwrap_or_default();
    assert_eq!(rules.len(), 10, "{rules:?}");
    assert_eq!(rules[1].resources, Some(strings(&["nodes"])));
    assert_eq!(rules[1].verbs, strings(&["*"]));
    assert_eq!(
        rules[9].resources,
        Some(strings(&["serviceaccounts/token"]))
    );
}

#[test]
fn default_cluster_role_is_deploy_rbac_cluster_role() {
    let chart = render(None).unwrap_or_else(|e| panic!("{e}"));
    let deploy = deploy_rbac();

    let chart_role: ClusterRole = one(&chart, "ClusterRole", None);
    let deploy_role: ClusterRole = one(&deploy, "ClusterRole", None);
    assert_eq!(chart_role.metadata.name, deploy_role.metadata.name);
    let chart_rules: Vec<PolicyRule> = chart_role.rules.unwrap_or_default();
    let deploy_rules: Vec<PolicyRule> = deploy_role.rules.unwrap_or_default();
    assert!(!deploy_rules.is_empty());
    assert_eq!(
        chart_rules, deploy_rules,
        "charts/cloud-controller-manager/values.yaml clusterRoleRules and deploy/rbac.yaml differ"
    );

    // Same identity: the ServiceAccount and the binding of the role to it.
    let chart_sa: ServiceAccount = one(&chart, "ServiceAccount", None);
    let deploy_sa: ServiceAccount = one(&deploy, "ServiceAccount", None);
    assert_eq!(chart_sa.metadata.name, deploy_sa.metadata.name);
    assert_eq!(chart_sa.metadata.namespace, deploy_sa.metadata.namespace);
    let name = deploy_role.metadata.name.as_deref();
    let chart_crb: ClusterRoleBinding = one(&chart, "ClusterRoleBinding", name);
    let deploy_crb: ClusterRoleBinding = one(&deploy, "ClusterRoleBinding", name);
    assert_eq!(chart_crb.role_ref, deploy_crb.role_ref);
    assert_eq!(chart_crb.subjects, deploy_crb.subjects);

    // The kube-system Role (Leases, controller ServiceAccounts) likewise.
    let chart_role: Role = one(&chart, "Role", None);
    let deploy_role: Role = one(&deploy, "Role", None);
    assert_eq!(chart_role.metadata.name, deploy_role.metadata.name);
    assert_eq!(
        chart_role.metadata.namespace,
        deploy_role.metadata.namespace
    );
    assert_eq!(
        chart_role.rules, deploy_role.rules,
        "charts/cloud-controller-manager/values.yaml kubeSystemRoleRules and deploy/rbac.yaml differ"
    );
    let chart_rb: RoleBinding = one(&chart, "RoleBinding", name);
    let deploy_rb: RoleBinding = one(&deploy, "RoleBinding", name);
    assert_eq!(chart_rb.role_ref, deploy_rb.role_ref);
    assert_eq!(chart_rb.subjects, deploy_rb.subjects);
    // And the authentication ConfigMap reader.
    let chart_reader: RoleBinding = one(
        &chart,
        "RoleBinding",
        Some("cloud-controller-manager:apiserver-authentication-reader"),
    );
    let deploy_reader: RoleBinding = one(
        &deploy,
        "RoleBinding",
        Some("system:stratus-cloud-controller-manager:apiserver-authentication-reader"),
    );
    assert_eq!(chart_reader.role_ref, deploy_reader.role_ref);
    assert_eq!(chart_reader.subjects, deploy_reader.subjects);
}

#[test]
fn cloud_config_is_mounted_where_the_flag_points() {
    let contents = "[Global]\nRegion = eu-central-1\nKubernetesClusterID = prod-1\n";
    for kind in ["Secret", "ConfigMap"] {
        let values = format!(
            "cloudConfig:\n  kind: {kind}\n  mountPath: /etc/ccm/\n  contents: |\n{}",
            contents
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        );
        let objects =
            render_with(&format!("cloud-config-{kind}"), &values).unwrap_or_else(|e| panic!("{e}"));
        let name = "aws-cloud-controller-manager-cloud-config";
        let rendered = match kind {
            "Secret" => {
                let secret: Secret = one(&objects, kind, Some(name));
                secret.string_data.unwrap_or_default()["cloud.conf"].clone()
            }
            _ => {
                let cm: ConfigMap = one(&objects, kind, Some(name));
                cm.data.unwrap_or_default()["cloud.conf"].clone()
            }
        };
        assert_eq!(rendered, contents);

        let ds: DaemonSet = one(&objects, "DaemonSet", None);
        let template = ds.spec.unwrap().template;
        let annotations = template.metadata.unwrap().annotations.unwrap_or_default();
        assert!(annotations.contains_key("checksum/cloud-config"));
        let pod = template.spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(
            container.args.as_deref().unwrap_or_default().last(),
            Some(&"--cloud-config=/etc/ccm/cloud.conf".to_string())
        );
        let mounts = container.volume_mounts.clone().unwrap_or_default();
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].mount_path, "/etc/ccm/");
        let volumes = pod.volumes.unwrap_or_default();
        assert_eq!(volumes.len(), 1);
        assert_eq!(volumes[0].name, mounts[0].name);
        let source = match kind {
            "Secret" => volumes[0]
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.clone()),
            _ => volumes[0].config_map.as_ref().map(|c| c.name.clone()),
        };
        assert_eq!(source.as_deref(), Some(name));
    }

    // The chart owns --cloud-config when it renders the file.
    let err = render_with(
        "cloud-config-twice",
        "cloudConfig:\n  contents: '[Global]'\nargs: [--cloud-provider=aws, --cloud-config=/x.conf]\n",
    )
    .expect_err("--cloud-config in args and cloudConfig.contents");
    assert!(err.contains("leave --cloud-config out of args"), "{err}");
}

#[test]
fn namespace_and_names_follow_the_values() {
    let objects = render_with(
        "names",
        "namespace: cloud\nnameOverride: stratus-ccm\nserviceAccountName: ccm\nimage:\n  repository: registry.example/ccm\n  tag: v9\nenv:\n  - name: AWS_REGION\n    value: eu-west-1\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ds: DaemonSet = one(&objects, "DaemonSet", Some("stratus-ccm"));
    assert_eq!(ds.metadata.namespace.as_deref(), Some("cloud"));
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("ccm"));
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.example/ccm:v9")
    );
    let env = pod.containers[0].env.clone().unwrap_or_default();
    assert_eq!(env.len(), 1);
    assert_eq!(env[0].name, "AWS_REGION");
    let sa: ServiceAccount = one(&objects, "ServiceAccount", None);
    assert_eq!(sa.metadata.name.as_deref(), Some("ccm"));
    assert_eq!(sa.metadata.namespace.as_deref(), Some("cloud"));
    // The Role lives in kube-system (where the Leases and controller ServiceAccounts are),
    // whatever the release namespace.
    let reader: RoleBinding = one(
        &objects,
        "RoleBinding",
        Some("system:stratus-cloud-controller-manager"),
    );
    assert_eq!(reader.metadata.namespace.as_deref(), Some("kube-system"));
    let subject = &reader.subjects.unwrap_or_default()[0];
    assert_eq!(subject.name, "ccm");
    assert_eq!(subject.namespace.as_deref(), Some("cloud"));
}

#[tokio::test(flavor = "multi_thread")]
async fn chart_installs_into_a_real_apiserver_and_binds_delegated_auth() {
    let env = TestEnv::start().await.expect("test environment");
    let admin = env
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    let kubeconfig = env.kubeconfig(Identity::Admin);
    let chart = chart_dir();
    let values = values_file(
        "install",
        "cloudConfig:\n  contents: |\n    [Global]\n    Region = us-east-1\n",
    );
    // The apiserver validates every object (no kubelet or scheduler runs: no pod starts).
    let out = run_helm(&[
        "install",
        "stratus-ccm",
        chart.to_str().unwrap(),
        "--namespace",
        "kube-system",
        "--values",
        values.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("STATUS: deployed"), "{out}");
    assert!(
        out.contains("rollout status daemonset/aws-cloud-controller-manager"),
        "NOTES: {out}"
    );

    let ds = Api::<DaemonSet>::namespaced(admin.clone(), "kube-system")
        .get("aws-cloud-controller-manager")
        .await
        .expect("DaemonSet installed");
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("cloud-controller-manager")
    );
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .get("aws-cloud-controller-manager-cloud-config")
        .await
        .expect("cloud config Secret installed");
    let role = Api::<ClusterRole>::all(admin.clone())
        .get("system:stratus-cloud-controller-manager")
        .await
        .expect("ClusterRole installed");
    let deploy_role: ClusterRole = one(&deploy_rbac(), "ClusterRole", None);
    assert_eq!(role.rules, deploy_role.rules);

    // The bindings to the apiserver's bootstrap roles grant what delegated authentication and
    // authorization of the secure port need, to the CCM's ServiceAccount.
    let ccm = Identity::CloudControllerManager;
    let can =
        |verb: &str, group: &str, resource: &str, namespace: Option<&str>, name: Option<&str>| {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(ccm.username().into()),
                    groups: Some(ccm.groups().iter().map(|g| g.to_string()).collect()),
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(verb.into()),
                        group: Some(group.into()),
                        resource: Some(resource.into()),
                        namespace: namespace.map(Into::into),
                        name: name.map(Into::into),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let api = Api::<SubjectAccessReview>::all(admin.clone());
            async move {
                let reviewed = api.create(&PostParams::default(), &review).await.unwrap();
                reviewed.status.is_some_and(|s| s.allowed)
            }
        };
    let delegated = [
        (
            "create",
            "authentication.k8s.io",
            "tokenreviews",
            None,
            None,
        ),
        (
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
            None,
        ),
        (
            "update",
            "coordination.k8s.io",
            "leases",
            Some("kube-system"),
            Some("cloud-controller-manager"),
        ),
        ("create", "", "serviceaccounts", Some("kube-system"), None),
    ];
    wait_for(
        "the chart's bindings to take effect",
        Duration::from_secs(30),
        || async {
            let mut missing = Vec::new();
            for (verb, group, resource, namespace, name) in delegated {
                if !can(verb, group, resource, namespace, name).await {
                    missing.push((verb, resource));
                }
            }
            anyhow::ensure!(missing.is_empty(), "denied: {missing:?}");
            Ok(Some(()))
        },
    )
    .await
    .unwrap();
    // The kube-system Role grants nothing elsewhere; the authentication ConfigMap (the secure
    // port's client CA and front-proxy settings) is readable, other ConfigMaps are not.
    assert!(
        !can(
            "update",
            "coordination.k8s.io",
            "leases",
            Some("default"),
            Some("x")
        )
        .await
    );
    assert!(
        can(
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("extension-apiserver-authentication")
        )
        .await
    );
    assert!(
        !can(
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("kube-proxy")
        )
        .await
    );

    let out = run_helm(&[
        "uninstall",
        "stratus-ccm",
        "--namespace",
        "kube-system",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("uninstalled"), "{out}");
    let gone = Api::<ClusterRole>::all(admin)
        .get_opt("system:stratus-cloud-controller-manager")
        .await
        .unwrap();
    assert!(gone.is_none(), "uninstall removes the ClusterRole");
}

#[test]
fn upstream_empty_env_map_means_no_env() {
    // Upstream's values.yaml has `env: {}`; values files copied from it keep working.
    let objects = render_with("env-map", "env: {}\n").unwrap_or_else(|e| panic!("{e}"));
    let ds: DaemonSet = one(&objects, "DaemonSet", None);
    assert!(ds.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .is_none());
}

#[test]
fn bad_values_fail_with_schema_errors() {
    // (values, the schema location the error must name)
    let cases = [
        ("args: --v=2\n", "/args"),
        ("args: [v=2]\n", "/args/0"),
        ("args: [[--v=2]]\n", "/args/0"),
        ("hostNetworking: 'yes'\n", "/hostNetworking"),
        ("tolerations: {key: x}\n", "/tolerations"),
        ("nodeSelector: [a]\n", "/nodeSelector"),
        (
            "clusterRoleRules: [{apiGroups: [''], resources: [nodes]}]\n",
            "/clusterRoleRules/0",
        ),
        (
            "clusterRoleRules: [{verbs: []}]\n",
            "/clusterRoleRules/0/verbs",
        ),
        (
            "image: {repository: x, pullPolicy: Sometimes}\n",
            "/image/pullPolicy",
        ),
        ("cloudConfig: {kind: File}\n", "/cloudConfig/kind"),
        (
            "cloudConfig: {enabled: true, global: {Region: x}}\n",
            "/cloudConfig",
        ),
        ("env: [{value: x}]\n", "/env"),
        ("securePort: 70000\n", "/securePort"),
        ("hostNetwork: true\n", "hostNetwork"),
    ];
    for (i, (values, location)) in cases.iter().enumerate() {
        let err = render_with(&format!("bad-{i}"), values)
            .expect_err(&format!("values {values:?} must be rejected"));
        assert!(
            err.contains("don't meet the specifications of the schema"),
            "{values:?} failed, but not by the schema: {err}"
        );
        assert!(
            err.contains(location),
            "{values:?}: the error does not name {location}: {err}"
        );
    }
}
