//! `make demo MODULE=aws`: the AWS module as one install on a local control plane — the module
//! chart rendered with `examples/cloud-provider-aws.values.yaml` and applied (CRDs first, as
//! `helm install` does), the module controller started as the module's ServiceAccount with the
//! module's settings, StorageClasses appearing from the settings, the registration Secret derived
//! from the provider cluster configuration, and a claim with no class given the module's default.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::flow::kubeconfig_with_token;
use stratus_scenarios::kube_fixture::{self, repo_root};
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_scenarios::wait_for;
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::{Identity, KubeCluster};
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let module = std::env::args().nth(1).unwrap_or_else(|| "aws".into());
    anyhow::ensure!(
        module == "aws",
        "MODULE={module}: only the aws module has a demo so far"
    );
    let root = repo_root();
    println!("==> starting etcd and kube-apiserver (RBAC on) on loopback ports");
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;

    println!("==> helm template charts/cloud-provider-aws -f examples/cloud-provider-aws.values.yaml, applied as helm install would");
    let docs = kube_fixture::helm_template(
        &root.join("charts/cloud-provider-aws"),
        "cloud-provider-aws",
        "kube-system",
        &[&root.join("examples/cloud-provider-aws.values.yaml")],
    )?;
    for file in [
        "charts/cloud-provider-aws/crds/awsinstanceclasses.yaml",
        "charts/cloud-data-discoverer/crds/instancetypescatalogs.crd.yaml",
    ] {
        let crd: DynamicObject = serde_yaml::from_str(&std::fs::read_to_string(root.join(file))?)?;
        kube_fixture::apply_object(&admin, &crd, "kube-system").await?;
        wait_established(&admin, crd.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for doc in &docs {
        let object: DynamicObject = serde_json::from_value(doc.clone())?;
        kube_fixture::apply_object(&admin, &object, "kube-system").await?;
        *kinds
            .entry(doc["kind"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    println!("    {} objects: {kinds:?}", docs.len());
    println!("    (no kubelet here: the workloads exist, their pods do not run; the module controller runs below as a process)");

    println!("==> running module-controller as system:serviceaccount:kube-system:module-controller with the module-settings ConfigMap");
    let token = service_account_token(&admin, "kube-system", "module-controller").await?;
    let kubeconfig = cluster.dir().join("module-controller.kubeconfig");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;
    let settings = Api::<ConfigMap>::namespaced(admin.clone(), "kube-system")
        .get("module-settings")
        .await?;
    let values = cluster.dir().join("values.yaml");
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
    let controller = CcmProcess::spawn(command, &cluster)?;
    let t0 = Instant::now();
    let classes = Api::<StorageClass>::all(admin.clone());
    let made = wait_for("the module's StorageClasses", WAIT, || async {
        let list = classes
            .list(&ListParams::default().labels("module=cloud-provider-aws"))
            .await?
            .items;
        Ok((list.len() == 3).then_some(list))
    })
    .await
    .with_context(|| controller.log())?;
    println!(
        "    StorageClasses in {:.2}s (gp3 replaced by the provision entry; sc1, st1 excluded):",
        t0.elapsed().as_secs_f64()
    );
    println!(
        "    {:<10} {:<22} {:<48} DEFAULT",
        "NAME", "BINDING", "PARAMETERS"
    );
    for sc in &made {
        let default = sc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
            .is_some_and(|v| v == "true");
        println!(
            "    {:<10} {:<22} {:<48} {}",
            sc.metadata.name.as_deref().unwrap_or(""),
            sc.volume_binding_mode.as_deref().unwrap_or(""),
            serde_json::to_string(&sc.parameters)?,
            if default { "yes" } else { "" }
        );
    }

    let secret = Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .get("d8-node-manager-cloud-provider")
        .await?;
    println!("\n==> kube-system/d8-node-manager-cloud-provider, derived from the provider cluster configuration and discovery data:");
    for (key, value) in secret.data.unwrap_or_default() {
        let text = String::from_utf8_lossy(&value.0).into_owned();
        let shown = if key == "aws" {
            let mut doc: serde_json::Value = serde_json::from_str(&text)?;
            doc["providerSecretAccessKey"] = "(hidden)".into();
            doc.to_string()
        } else {
            text
        };
        println!("    {key:<24} {shown}");
    }

    println!("\n==> a PersistentVolumeClaim that names no class");
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))?;
    let created = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &claim)
        .await?;
    println!(
        "    storageClassName: {} (the module's default; the EBS driver provisions it once a pod is scheduled — see `cargo test -p ebs-csi-driver --test module_default_class`)",
        created.spec.and_then(|s| s.storage_class_name).unwrap_or_default()
    );
    println!(
        "\n==> done; state in {} (kept with STRATUS_KEEP_ENV=1)",
        cluster.dir().display()
    );
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
