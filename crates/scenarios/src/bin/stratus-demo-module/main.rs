//! `make demo MODULE=aws|openstack|dvp`: a module as one install on a local control plane — the
//! module chart rendered with `examples/cloud-provider-<cloud>.values.yaml` and applied (CRDs
//! first, as `helm install` does), the module controller started as the module's ServiceAccount
//! with the module's settings, StorageClasses appearing, the registration Secret derived from the
//! provider cluster configuration and the discovery data; then each cloud's own story in
//! `aws.rs`, `openstack.rs` and `dvp.rs`.

mod aws;
mod dvp;
mod openstack;
mod story;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::flow::kubeconfig_with_token;
use stratus_scenarios::kube_fixture::{self, repo_root};
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_scenarios::wait_for;
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::KubeCluster;

pub(crate) const WAIT: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let module = std::env::args().nth(1).unwrap_or_else(|| "aws".into());
    match module.as_str() {
        "aws" => aws::run().await,
        "openstack" => openstack::run().await,
        "dvp" => dvp::run().await,
        other => anyhow::bail!("MODULE={other}: the module demos are aws, openstack and dvp"),
    }
}

/// `helm template charts/cloud-provider-<cloud>` with the example values (and `more`), applied
/// as `helm install` would: `crds` first.
async fn install_chart(
    admin: &kube::Client,
    cloud: &str,
    more: &[&Path],
    crds: &[&str],
) -> anyhow::Result<()> {
    let root = repo_root();
    println!("==> helm template charts/cloud-provider-{cloud} -f examples/cloud-provider-{cloud}.values.yaml, applied as helm install would");
    let example = root.join(format!("examples/cloud-provider-{cloud}.values.yaml"));
    let mut values: Vec<&Path> = vec![&example];
    values.extend(more);
    let docs = kube_fixture::helm_template(
        &root.join(format!("charts/cloud-provider-{cloud}")),
        &format!("cloud-provider-{cloud}"),
        "kube-system",
        &values,
    )?;
    for file in crds
        .iter()
        .chain(&["charts/cloud-data-discoverer/crds/instancetypescatalogs.crd.yaml"])
    {
        let crd: DynamicObject = serde_yaml::from_str(&std::fs::read_to_string(root.join(file))?)?;
        kube_fixture::apply_object(admin, &crd, "kube-system").await?;
        wait_established(admin, crd.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    // Namespaces other than the release's exist before an install (Deckhouse has them).
    let namespaces: std::collections::BTreeSet<&str> = docs
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .filter(|ns| *ns != "kube-system")
        .collect();
    for ns in namespaces {
        println!("    kubectl create namespace {ns}");
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for doc in &docs {
        let object: DynamicObject = serde_json::from_value(doc.clone())?;
        kube_fixture::apply_object(admin, &object, "kube-system").await?;
        *kinds
            .entry(doc["kind"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    println!("    {} objects: {kinds:?}", docs.len());
    println!("    (no kubelet here: the workloads exist, their pods do not run; the controllers below run as processes)");
    Ok(())
}

/// The cloud-data-discoverer for `cloud` as its ServiceAccount with `envs`; the discovery Secret
/// once it is written, and the running process.
async fn run_discoverer(
    cluster: &KubeCluster,
    admin: &kube::Client,
    cloud: &str,
    envs: Vec<(String, String)>,
) -> anyhow::Result<(Secret, CcmProcess)> {
    let token = service_account_token(admin, "kube-system", "cloud-data-discoverer").await?;
    let kubeconfig = cluster.dir().join("cloud-data-discoverer.kubeconfig");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;
    let mut command = std::process::Command::new(sibling_binary("cloud-data-discoverer")?);
    command
        .arg(format!("--cloud-provider={cloud}"))
        .arg("--listen-address=127.0.0.1:0")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .envs(envs)
        .env("POD_NAMESPACE", "kube-system");
    let discoverer = CcmProcess::spawn(command, cluster)?;
    let secrets = Api::<Secret>::namespaced(admin.clone(), "kube-system");
    let discovery = wait_for("the discovery data", WAIT, || async {
        Ok(secrets.get_opt("d8-cloud-provider-discovery-data").await?)
    })
    .await
    .with_context(|| discoverer.log())?;
    Ok((discovery, discoverer))
}

/// The module controller as the module's ServiceAccount with the `module-settings` values.
async fn run_module_controller(
    cluster: &KubeCluster,
    admin: &kube::Client,
) -> anyhow::Result<CcmProcess> {
    println!("==> running module-controller as system:serviceaccount:kube-system:module-controller with the module-settings ConfigMap");
    let token = service_account_token(admin, "kube-system", "module-controller").await?;
    let kubeconfig = cluster.dir().join("module-controller.kubeconfig");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;
    let settings = Api::<ConfigMap>::namespaced(admin.clone(), "kube-system")
        .get("module-settings")
        .await?;
    let values: PathBuf = cluster.dir().join("values.yaml");
    let text = settings
        .data
        .unwrap_or_default()
        .remove("values.yaml")
        .context("values.yaml")?;
    std::fs::write(&values, &text)?;
    println!("{}", indent(&text));
    let mut command = std::process::Command::new(sibling_binary("module-controller")?);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--values={}", values.display()))
        .args(["--metrics-bind-address=0", "--health-probe-bind-address=0"])
        .env("POD_NAMESPACE", "kube-system");
    CcmProcess::spawn(command, cluster)
}

/// The CSI sidecars and kube-controller-manager, built into the cache the first time.
async fn tools() -> anyhow::Result<stratus_scenarios::csi::harness::Tools> {
    println!("==> building or finding the CSI sidecars and kube-controller-manager (cached)");
    stratus_scenarios::csi::harness::Tools::install().await
}

/// Runs the module controller, waits for the module's `count` StorageClasses and shows them
/// (`how` says what the settings did) and the registration Secret (`secret_key` hidden); returns
/// the controller, which runs until dropped.
async fn classes_and_registration(
    cluster: &KubeCluster,
    admin: &kube::Client,
    cloud: &str,
    count: usize,
    how: &str,
    secret_key: &str,
) -> anyhow::Result<CcmProcess> {
    let controller = run_module_controller(cluster, admin).await?;
    let t0 = tokio::time::Instant::now();
    let made = wait_classes(
        admin,
        &format!("cloud-provider-{cloud}"),
        count,
        &controller,
    )
    .await?;
    println!(
        "    StorageClasses in {:.2}s ({how}):",
        t0.elapsed().as_secs_f64()
    );
    print_classes(&made)?;
    print_registration(admin, cloud, secret_key).await?;
    Ok(controller)
}

/// The module's `count` StorageClasses, once they exist.
async fn wait_classes(
    admin: &kube::Client,
    module: &str,
    count: usize,
    controller: &CcmProcess,
) -> anyhow::Result<Vec<StorageClass>> {
    let classes = Api::<StorageClass>::all(admin.clone());
    wait_for("the module's StorageClasses", WAIT, || async {
        let list = classes
            .list(&ListParams::default().labels(&format!("module={module}")))
            .await?
            .items;
        Ok((list.len() == count).then_some(list))
    })
    .await
    .with_context(|| controller.log())
}

fn print_classes(made: &[StorageClass]) -> anyhow::Result<()> {
    println!(
        "    {:<16} {:<22} {:<40} {:<9} DEFAULT",
        "NAME", "BINDING", "PARAMETERS", "EXPANSION"
    );
    for sc in made {
        let default = sc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
            .is_some_and(|v| v == "true");
        println!(
            "    {:<16} {:<22} {:<40} {:<9} {}",
            sc.metadata.name.as_deref().unwrap_or(""),
            sc.volume_binding_mode.as_deref().unwrap_or(""),
            serde_json::to_string(&sc.parameters)?,
            sc.allow_volume_expansion.unwrap_or(false),
            if default { "yes" } else { "" }
        );
    }
    Ok(())
}

/// The registration Secret, `secret_key` of the `cloud` document hidden.
async fn print_registration(
    admin: &kube::Client,
    cloud: &str,
    secret_key: &str,
) -> anyhow::Result<()> {
    let secrets = Api::<Secret>::namespaced(admin.clone(), "kube-system");
    // The controller writes the Secret and the StorageClasses independently: wait for it too.
    let secret = wait_for("the registration Secret", WAIT, || async {
        Ok(secrets.get_opt("d8-node-manager-cloud-provider").await?)
    })
    .await?;
    println!("\n==> kube-system/d8-node-manager-cloud-provider, derived from the provider cluster configuration and discovery data:");
    for (key, value) in secret.data.unwrap_or_default() {
        let text = String::from_utf8_lossy(&value.0).into_owned();
        let shown = if key == cloud {
            let mut doc: serde_json::Value = serde_json::from_str(&text)?;
            if doc.get(secret_key).is_some() {
                doc[secret_key] = "(hidden)".into();
            }
            if doc["connection"].get(secret_key).is_some() {
                doc["connection"][secret_key] = "(hidden)".into();
            }
            doc.to_string()
        } else {
            text
        };
        println!("    {key:<24} {shown}");
    }
    Ok(())
}

fn done(cluster: &KubeCluster) {
    println!(
        "\n==> done; state in {} (kept with STRATUS_KEEP_ENV=1)",
        cluster.dir().display()
    );
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
