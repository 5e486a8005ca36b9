//! A module's chart (`charts/cloud-provider-<cloud>`) as one release on the real node, whatever
//! the cloud: installed with helm, every workload helm made for the release up (each pod Running
//! and Ready, none restarted, every container's process as its security context says), and what
//! the module controller derives — its StorageClasses and
//! the node-manager registration Secret — read back from the apiserver.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::{RealCluster, NODE_NAME};

use crate::{chart, pods, runtime};

/// The namespace every module release goes to (the module chart's README says so).
pub const NAMESPACE: &str = "kube-system";
/// The annotation helm puts on every object of a release.
const RELEASE_ANNOTATION: &str = "meta.helm.sh/release-name";
/// The pods whose logs explain what the module derived: the module controller's and the
/// discoverer's.
const DERIVING: &str = "app.kubernetes.io/name in (module-controller,cloud-data-discoverer)";
/// The registration Secret node-manager reads.
pub const REGISTRATION: &str = "d8-node-manager-cloud-provider";

/// The release (and chart) name of `cloud`'s module: `cloud-provider-<cloud>`.
pub fn release(cloud: &str) -> String {
    format!("cloud-provider-{cloud}")
}

/// `helm upgrade --install cloud-provider-<cloud> charts/cloud-provider-<cloud>` into
/// [`NAMESPACE`] with the shipped example `examples/cloud-provider-<cloud>.values.yaml` first and
/// `values` over it (as `-f example -f values`: maps merge, lists are replaced).
pub fn install(cluster: &RealCluster, cloud: &str, values: &serde_json::Value) -> Result<()> {
    let name = release(cloud);
    let example = stratus_testenv::repo_root()
        .join("examples")
        .join(format!("{name}.values.yaml"));
    let file = cluster.dir().join(format!("values-{name}.yaml"));
    std::fs::write(&file, serde_yaml::to_string(values)?)?;
    chart::install(cluster, &name, &name, NAMESPACE, &[&example, &file], &[])
}

/// One workload of a release: `Deployment/<name>` or `DaemonSet/<name>`, its namespace, the
/// pods it wants and their selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// `Kind/name`.
    pub id: String,
    /// Where it runs.
    pub namespace: String,
    /// Pods it wants (a DaemonSet on the one node: one).
    pub desired: usize,
    /// Its pods' selector, as `key=value,…`.
    pub selector: String,
}

/// Every Deployment and DaemonSet helm made for `release`, in any namespace, sorted by id.
pub async fn workloads(client: &kube::Client, release: &str) -> Result<Vec<Workload>> {
    let of_release = |annotations: &Option<BTreeMap<String, String>>| {
        annotations
            .as_ref()
            .and_then(|a| a.get(RELEASE_ANNOTATION))
            .is_some_and(|r| r == release)
    };
    let mut found = Vec::new();
    for deployment in Api::<Deployment>::all(client.clone())
        .list(&ListParams::default())
        .await?
    {
        if !of_release(&deployment.metadata.annotations) {
            continue;
        }
        let spec = deployment.spec.context("a Deployment without spec")?;
        found.push(Workload {
            id: format!(
                "Deployment/{}",
                deployment.metadata.name.unwrap_or_default()
            ),
            namespace: deployment.metadata.namespace.unwrap_or_default(),
            desired: usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0),
            selector: selector(&spec.selector),
        });
    }
    for set in Api::<DaemonSet>::all(client.clone())
        .list(&ListParams::default())
        .await?
    {
        if !of_release(&set.metadata.annotations) {
            continue;
        }
        let spec = set.spec.context("a DaemonSet without spec")?;
        found.push(Workload {
            id: format!("DaemonSet/{}", set.metadata.name.unwrap_or_default()),
            namespace: set.metadata.namespace.unwrap_or_default(),
            desired: 1,
            selector: selector(&spec.selector),
        });
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// `matchLabels` as a label selector string (the charts select by labels only).
fn selector(selector: &LabelSelector) -> String {
    selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Waits until every workload of `release` has all its pods Running and Ready (a crash-looping
/// or restarted pod fails at once with its log), then checks that every container of every pod
/// runs as its security context says, read from the kernel ([`runtime`]); returns the
/// workloads and the number of containers checked.
pub async fn wait_all_ready(
    client: &kube::Client,
    release: &str,
    deadline: Duration,
) -> Result<(Vec<Workload>, usize)> {
    let found = workloads(client, release).await?;
    anyhow::ensure!(!found.is_empty(), "helm made no workload for {release}");
    let mut checked = 0;
    for workload in &found {
        let ready = pods::wait_ready(
            client,
            &workload.namespace,
            &workload.selector,
            workload.desired,
            deadline,
        )
        .await
        .with_context(|| format!("{} of {release}", workload.id))?;
        for pod in &ready {
            for container in pod.spec.iter().flat_map(|s| s.containers.iter()) {
                let expected = runtime::Expected::of(pod, &container.name)?;
                let process = runtime::container_process(pod, &container.name)?;
                let problems = process.problems(&expected);
                anyhow::ensure!(
                    problems.is_empty(),
                    "{} container {} runs otherwise than its security context says: {problems:?} ({process:?})",
                    workload.id,
                    container.name
                );
                checked += 1;
            }
        }
    }
    Ok((found, checked))
}

/// The StorageClasses the module controller made for `cloud` (label `module=cloud-provider-<cloud>`),
/// once there are `count` of them, sorted by name.
pub async fn storage_classes(
    client: &kube::Client,
    cloud: &str,
    count: usize,
    deadline: Duration,
) -> Result<Vec<StorageClass>> {
    let classes = Api::<StorageClass>::all(client.clone());
    let selector = format!("module={}", release(cloud));
    let waited = wait_for("the module's StorageClasses", deadline, || {
        let (classes, selector) = (classes.clone(), selector.clone());
        async move {
            let list = classes
                .list(&ListParams::default().labels(&selector))
                .await?
                .items;
            Ok((list.len() == count).then_some(list))
        }
    })
    .await;
    let mut made = match waited {
        Ok(made) => made,
        Err(e) => {
            let found: Vec<String> = classes
                .list(&ListParams::default())
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .filter_map(|c| c.metadata.name)
                        .collect()
                })
                .unwrap_or_default();
            anyhow::bail!(
                "{e:#}; StorageClasses: {found:?}\n{}",
                pods::logs(client, NAMESPACE, DERIVING).await
            )
        }
    };
    made.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(made)
}

/// The classes' names, in order.
pub fn names(classes: &[StorageClass]) -> Vec<&str> {
    classes
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect()
}

/// The names of the classes annotated as the cluster's default.
pub fn default_names(classes: &[StorageClass]) -> Vec<&str> {
    classes
        .iter()
        .filter(|c| is_default(c))
        .filter_map(|c| c.metadata.name.as_deref())
        .collect()
}

/// Waits until the CCM has given the kubelet's Node the provider ID `provider_id`.
pub async fn wait_node_initialised(
    client: &kube::Client,
    provider_id: &str,
    deadline: Duration,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the CCM to initialise the Node", deadline, || async {
        let node = nodes.get(NODE_NAME).await?;
        let id = node.spec.and_then(|s| s.provider_id);
        Ok((id.as_deref() == Some(provider_id)).then_some(()))
    })
    .await
}

/// Whether the class is annotated as the cluster's default.
fn is_default(class: &StorageClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
        .is_some_and(|v| v == "true")
}

/// The registration Secret's data as text, once it exists.
pub async fn registration(
    client: &kube::Client,
    deadline: Duration,
) -> Result<BTreeMap<String, String>> {
    let secrets = Api::<Secret>::namespaced(client.clone(), "kube-system");
    let secret = wait_for("the registration Secret", deadline, || async {
        Ok(secrets.get_opt(REGISTRATION).await?)
    })
    .await?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_the_chart() {
        assert_eq!(release("aws"), "cloud-provider-aws");
    }

    #[test]
    fn a_selector_joins_its_labels() {
        let labels = LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("app".to_owned(), "x".to_owned()),
                ("tier".to_owned(), "y".to_owned()),
            ])),
            ..LabelSelector::default()
        };
        assert_eq!(selector(&labels), "app=x,tier=y");
    }
}
