//! The module charts (`charts/cloud-provider-*`) with the example values of `examples/`: each
//! renders (linked component charts, the module settings ConfigMap, the provider configuration
//! Secret), its RBAC is exactly the union of its components' (each rendered alone with the same
//! values) and nothing more; and the AWS module installed into a real apiserver (every object
//! applied, CRDs first) works as a whole: the module controller under the module's own RBAC,
//! reading the module's settings ConfigMap and configuration Secret, makes the example's classes
//! (default from `global.defaultClusterStorageClass`) and the registration Secrets.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use prometheus_client::registry::Registry;
use serde_json::Value;
use stratus_module::driver::Driver;
use stratus_module::metrics::Metrics;
use stratus_module::Cloud;
use stratus_scenarios::csi::flow::kubeconfig_with_token;
use stratus_scenarios::kube_fixture::{self, repo_root};
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::{Identity, KubeCluster};

mod common;

const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

fn helm_template(chart: &Path, values: &[&Path]) -> Result<Vec<Value>> {
    kube_fixture::helm_template(chart, "module", "kube-system", values)
}

/// RBAC objects without their labels (the chart labels name the chart that rendered them).
fn rbac(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .filter(|d| RBAC_KINDS.contains(&d["kind"].as_str().unwrap_or_default()))
        .map(|d| {
            let mut d = d.clone();
            d["metadata"].as_object_mut().map(|m| m.remove("labels"));
            d.to_string()
        })
        .collect()
}

#[test]
fn each_module_chart_renders_its_components_rbac_and_nothing_more() -> Result<()> {
    let root = repo_root();
    let dir = tempfile_dir()?;
    for cloud in ["aws", "openstack", "dvp"] {
        let chart = root.join(format!("charts/cloud-provider-{cloud}"));
        let example = root.join(format!("examples/cloud-provider-{cloud}.values.yaml"));
        let module_docs = helm_template(&chart, &[&example])?;
        let defaults: Value =
            serde_yaml::from_str(&std::fs::read_to_string(chart.join("values.yaml"))?)?;
        let given: Value = serde_yaml::from_str(&std::fs::read_to_string(&example)?)?;
        let mut union = BTreeSet::new();
        for link in std::fs::read_dir(chart.join("charts"))? {
            let link = link?.path();
            let target = std::fs::canonicalize(&link)?;
            let name: String = serde_yaml::from_str::<Value>(&std::fs::read_to_string(
                target.join("Chart.yaml"),
            )?)?["name"]
                .as_str()
                .context("a chart name")?
                .to_owned();
            if name == "aws-load-balancer-controller" {
                continue; // off by default (loadBalancerController.enabled)
            }
            let mut files = Vec::new();
            for (i, source) in [&defaults, &given].into_iter().enumerate() {
                if let Some(v) = source.get(&name) {
                    let file = dir.join(format!("{cloud}-{name}-{i}.yaml"));
                    std::fs::write(&file, serde_yaml::to_string(v)?)?;
                    files.push(file);
                }
            }
            let refs: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
            union.extend(rbac(&helm_template(&target, &refs)?));
        }
        assert_eq!(
            rbac(&module_docs),
            union,
            "{cloud}: the module's RBAC is its components'"
        );
        assert!(union.len() >= 10, "{cloud}: {} RBAC objects", union.len());
        let kinds: BTreeSet<&str> = module_docs
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .collect();
        assert!(
            kinds.contains("Deployment") && kinds.contains("DaemonSet"),
            "{cloud}: {kinds:?}"
        );
        assert!(
            module_docs
                .iter()
                .any(|d| d["metadata"]["name"] == "module-settings"),
            "{cloud}: no settings ConfigMap"
        );
    }
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("stratus-module-charts-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_module_installed_works_as_a_whole() -> Result<()> {
    let root = repo_root();
    let docs = helm_template(
        &root.join("charts/cloud-provider-aws"),
        &[&root.join("examples/cloud-provider-aws.values.yaml")],
    )?;
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    // CRDs (helm installs the charts' crds/ first; `helm template` leaves them out).
    for file in [
        "charts/cloud-provider-aws/crds/awsinstanceclasses.yaml",
        "charts/cloud-data-discoverer/crds/instancetypescatalogs.crd.yaml",
    ] {
        let crd: DynamicObject = serde_yaml::from_str(&std::fs::read_to_string(root.join(file))?)?;
        kube_fixture::apply_object(&admin, &crd, "kube-system").await?;
        wait_established(&admin, crd.metadata.name.as_deref().context("crd name")?).await?;
    }
    for doc in &docs {
        let object: DynamicObject = serde_json::from_value(doc.clone())?;
        kube_fixture::apply_object(&admin, &object, "kube-system")
            .await
            .with_context(|| format!("applying {} {:?}", doc["kind"], object.metadata.name))?;
    }
    // The module controller as the module's ServiceAccount, with the module's settings file.
    let token = service_account_token(&admin, "kube-system", "module-controller").await?;
    let kubeconfig = cluster.dir().join("module.kubeconfig");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let controller = kube::Client::try_from(config)?;
    let settings = Api::<ConfigMap>::namespaced(admin.clone(), "kube-system")
        .get("module-settings")
        .await?;
    let values = cluster.dir().join("values.yaml");
    std::fs::write(
        &values,
        settings
            .data
            .unwrap_or_default()
            .remove("values.yaml")
            .context("values.yaml")?,
    )?;
    let mut registry = Registry::default();
    let driver = Driver::new(
        controller,
        Cloud::Aws,
        Some(values),
        Metrics::register(&mut registry),
    );
    assert_eq!(driver.reconcile().await, vec![]);

    let bed_classes = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(admin.clone())
        .list(&kube::api::ListParams::default().labels("module=cloud-provider-aws"))
        .await?;
    let mut names: Vec<(String, bool)> = bed_classes
        .items
        .iter()
        .map(|sc| {
            (
                sc.metadata.name.clone().unwrap_or_default(),
                common::is_default(sc),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("gp2".to_string(), false),
            ("gp3".to_string(), true),
            ("io2-fast".to_string(), false)
        ]
    );
    let secret =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(admin.clone(), "kube-system")
            .get("d8-node-manager-cloud-provider")
            .await?;
    let aws: Value = serde_json::from_slice(&secret.data.unwrap_or_default()["aws"].0)?;
    assert_eq!(
        aws["internal"]["zoneToSubnetIdMap"]["eu-central-1b"],
        "subnet-0123456789abcdef1"
    );
    assert_eq!(aws["tags"]["team"], "platform");
    Ok(())
}
