//! `helm upgrade --install` of a chart of this repository into the real cluster, with the
//! admin kubeconfig and `--set` values; helm runs inside the test's network namespace.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use stratus_testenv::node::RealCluster;

/// Installs `charts/<chart>` as `release` in `namespace` with the values `values` (written to
/// a file beside the cluster's logs), as `helm upgrade --install -f`.
pub fn install_with(
    cluster: &RealCluster,
    chart: &str,
    release: &str,
    namespace: &str,
    values: &serde_json::Value,
) -> Result<()> {
    let file = cluster.dir().join(format!("values-{release}.yaml"));
    std::fs::write(&file, serde_yaml::to_string(values)?)?;
    install(cluster, chart, release, namespace, &[&file], &[])
}

/// Installs `charts/<chart>` as `release` in `namespace` with `values` (`key=value`, as
/// `--set`) and the values files `files`.
pub fn install(
    cluster: &RealCluster,
    chart: &str,
    release: &str,
    namespace: &str,
    files: &[&Path],
    values: &[String],
) -> Result<()> {
    let helm = stratus_testenv::ensure_installed()?.helm;
    let chart_dir = stratus_testenv::repo_root().join("charts").join(chart);
    let mut cmd = Command::new(helm);
    cmd.args(["upgrade", "--install", release])
        .arg(&chart_dir)
        .args(["--namespace", namespace, "--create-namespace"])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig());
    for file in files {
        cmd.arg("-f").arg(file);
    }
    for value in values {
        cmd.args(["--set", value]);
    }
    let out = cmd
        .output()
        .with_context(|| format!("running helm install {chart}"))?;
    anyhow::ensure!(
        out.status.success(),
        "helm install {chart}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
