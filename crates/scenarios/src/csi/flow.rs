//! What the CSI drivers' sidecar-flow tests share: a driver chart rendered by the real helm
//! (its RBAC documents and the controller containers' arguments), sidecars started outside a
//! pod with the chart's arguments and a ServiceAccount's kubeconfig, the Node and CSINode
//! objects a kubelet and a registrar would write, and log tails for failure messages.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use serde::Deserialize;
use tokio::process::{Child, Command};

use crate::kube_fixture::repo_root;

/// A chart rendered by the real helm: its RBAC documents (as one manifest) and the arguments
/// of each container of its Deployments.
pub struct RenderedChart {
    /// ServiceAccounts, (Cluster)Roles and their bindings.
    pub rbac: String,
    /// Container name → arguments.
    pub args: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct Doc {
    kind: String,
    spec: Option<DeploymentSpec>,
}

#[derive(Deserialize)]
struct DeploymentSpec {
    template: PodTemplate,
}

#[derive(Deserialize)]
struct PodTemplate {
    spec: PodSpec,
}

#[derive(Deserialize)]
struct PodSpec {
    containers: Vec<Container>,
}

#[derive(Deserialize)]
struct Container {
    name: String,
    #[serde(default)]
    args: Vec<String>,
}

/// Renders `charts/<chart>` as release `release` in `namespace`. Blocking.
pub fn render_chart(chart: &str, release: &str, namespace: &str) -> Result<RenderedChart> {
    render_chart_with(chart, release, namespace, &[])
}

/// [`render_chart`] with `--set` values (`key=value`). Blocking.
pub fn render_chart_with(
    chart: &str,
    release: &str,
    namespace: &str,
    sets: &[&str],
) -> Result<RenderedChart> {
    let helm = stratus_testenv::ensure_installed()?.helm;
    let out = std::process::Command::new(helm)
        .args(["template", release, "--namespace", namespace])
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .arg(repo_root().join("charts").join(chart))
        .output()
        .context("running helm template")?;
    if !out.status.success() {
        bail!(
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout)?;
    let mut rbac = Vec::new();
    let mut args = BTreeMap::new();
    for part in text.split("\n---") {
        let Ok(doc) = serde_yaml::from_str::<Doc>(part) else {
            continue;
        };
        match doc.kind.as_str() {
            "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => {
                rbac.push(part.trim().to_string());
            }
            "Deployment" => {
                for c in doc
                    .spec
                    .context("a Deployment without spec")?
                    .template
                    .spec
                    .containers
                {
                    args.insert(c.name, c.args);
                }
            }
            _ => {}
        }
    }
    Ok(RenderedChart {
        rbac: rbac.join("\n---\n"),
        args,
    })
}

/// A sidecar's arguments from the chart, run outside a pod: the socket, the ServiceAccount's
/// kubeconfig and the lease namespace a pod would take from its own namespace. The chart's
/// `--http-endpoint` (a fixed port on every interface, the pod's own) becomes a free loopback
/// port, so that sidecars of parallel tests never collide and nothing is served off the host.
pub fn sidecar_args(
    chart: &RenderedChart,
    name: &str,
    socket: &Path,
    kubeconfig: &Path,
    namespace: &str,
) -> Result<Vec<String>> {
    let args = chart
        .args
        .get(name)
        .with_context(|| format!("the chart has no {name} container"))?;
    let mut out: Vec<String> = args
        .iter()
        .map(|a| {
            if a.starts_with("--http-endpoint=") {
                "--http-endpoint=127.0.0.1:0".to_string()
            } else {
                a.replace("$(ADDRESS)", &socket.display().to_string())
            }
        })
        .collect();
    out.push(format!("--kubeconfig={}", kubeconfig.display()));
    out.push(format!("--leader-election-namespace={namespace}"));
    Ok(out)
}

/// Starts `program args` with its stderr appended to `log`; killed when dropped.
pub fn spawn(
    program: &Path,
    args: &[String],
    log: &Path,
    envs: &[(String, String)],
) -> Result<Child> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    Command::new(program)
        .args(args)
        .envs(envs.iter().cloned())
        .stdout(Stdio::null())
        .stderr(log_file)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))
}

/// The logs a controller flow writes in its directory (driver, sidecars, kube-controller-manager).
pub const CONTROLLER_LOGS: [&str; 5] = [
    "driver.log",
    "provisioner.log",
    "attacher.log",
    "resizer.log",
    "kcm.log",
];

/// SIGKILLs every process of a controller "pod" and reaps it, as a kubelet's restart would.
pub async fn kill_pod(pod: &mut Vec<Child>) -> Result<()> {
    for mut child in pod.drain(..) {
        child.start_kill()?;
        child.wait().await?;
    }
    Ok(())
}

/// Writes a kubeconfig for `server` authenticating with `token`.
pub fn kubeconfig_with_token(path: &Path, server: &str, token: &str) -> Result<()> {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        ),
    )?;
    Ok(())
}

/// The tails (25 lines) of the named logs in `dir`, for a failure message.
pub fn log_tails(dir: &Path, names: &[&str]) -> String {
    names.iter().map(|name| log_tail(dir, name, 25)).collect()
}

/// The last `lines` lines of the log `name` in `dir` under a `--- name` line, for a failure
/// message.
pub fn log_tail(dir: &Path, name: &str, lines: usize) -> String {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    let mut out = format!("--- {name}\n");
    for line in tail.into_iter().rev() {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Fails when the log `name` in `dir` shows a request the RBAC refused (`forbidden`), naming
/// `who` and the first five refusals.
pub fn ensure_nothing_forbidden(dir: &Path, name: &str, who: &str) -> Result<()> {
    let log = std::fs::read_to_string(dir.join(name))?;
    anyhow::ensure!(
        !log.contains("forbidden"),
        "{who} was refused something under the chart's RBAC:\n{}",
        log.lines()
            .filter(|l| l.contains("forbidden"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

/// Creates the Node `node` with topology `labels`, and the CSINode the registrar makes the
/// kubelet write for `driver` (node ID `node_id`, the labels' keys as topology keys).
pub async fn node_objects(
    admin: &Client,
    node: &str,
    driver: &str,
    node_id: &str,
    labels: BTreeMap<String, String>,
) -> Result<()> {
    let keys: Vec<String> = labels.keys().cloned().collect();
    Api::<Node>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Node {
                metadata: ObjectMeta {
                    name: Some(node.into()),
                    labels: Some(labels),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    csi_node(admin, node, driver, node_id, keys).await
}

/// Writes the CSINode the node-driver-registrar would for `node`: `driver` with `node_id` and
/// `keys` as its topology keys.
pub async fn csi_node(
    admin: &Client,
    node: &str,
    driver: &str,
    node_id: &str,
    keys: Vec<String>,
) -> Result<()> {
    Api::<CSINode>::all(admin.clone())
        .create(
            &PostParams::default(),
            &CSINode {
                metadata: ObjectMeta {
                    name: Some(node.into()),
                    ..Default::default()
                },
                spec: CSINodeSpec {
                    drivers: vec![CSINodeDriver {
                        name: driver.into(),
                        node_id: node_id.into(),
                        topology_keys: Some(keys),
                        ..Default::default()
                    }],
                },
            },
        )
        .await?;
    Ok(())
}
