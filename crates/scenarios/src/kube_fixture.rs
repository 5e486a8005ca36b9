//! Kubernetes set-up: uninitialised Nodes (as a kubelet with `--cloud-provider=external` makes
//! them), the shipped RBAC manifests, and reads used by assertions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, ServiceAccount, Taint};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde::Deserialize;

/// The taint the kubelet puts on nodes when a cloud provider is external.
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The repository root (for `deploy/`).
pub fn repo_root() -> PathBuf {
    stratus_testenv::repo_root()
}

/// Creates a Node tainted as uninitialised, with kubelet-reported internal IPs.
pub async fn create_uninitialized_node(
    admin: &Client,
    name: &str,
    internal_ips: &[&str],
    annotations: BTreeMap<String, String>,
) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    node.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    node.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: UNINITIALIZED.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]),
        ..NodeSpec::default()
    });
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("create node {name}"))?;
    if internal_ips.is_empty() {
        return Ok(created);
    }
    let status = NodeStatus {
        addresses: Some(
            internal_ips
                .iter()
                .map(|ip| NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.to_string(),
                })
                .chain(std::iter::once(NodeAddress {
                    type_: "Hostname".into(),
                    address: name.to_string(),
                }))
                .collect(),
        ),
        ..NodeStatus::default()
    };
    let patch = serde_json::json!({ "status": status });
    Ok(nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?)
}

/// Creates a static Node (no taint, no providerID), as on-premises nodes are.
/// Creates uninitialised Nodes named `names`, 16 requests at a time.
pub async fn create_uninitialized_nodes<'a>(
    admin: &Client,
    names: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let created = futures::stream::iter(names)
        .map(|name| create_uninitialized_node(admin, name, &[], BTreeMap::new()))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    created.into_iter().try_for_each(|r| r.map(|_| ()))
}

/// Creates a static Node (no taint, no providerID), as on-premises nodes are.
pub async fn create_static_node(admin: &Client, name: &str) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    Ok(nodes.create(&PostParams::default(), &node).await?)
}

/// Creates an initialised Node (no taint) with a providerID and pod CIDRs, as a node looks once
/// the cloud-node controller (and an IPAM) are done with it.
pub async fn create_initialized_node(
    admin: &Client,
    name: &str,
    provider_id: &str,
    pod_cidrs: &[&str],
) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    node.spec = Some(NodeSpec {
        provider_id: Some(provider_id.to_string()),
        pod_cidr: pod_cidrs.first().map(|c| c.to_string()),
        pod_cidrs: (!pod_cidrs.is_empty())
            .then(|| pod_cidrs.iter().map(|c| c.to_string()).collect()),
        ..NodeSpec::default()
    });
    nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("create node {name}"))
}

/// Deletes a Node (no error when it is already gone).
pub async fn delete_node(admin: &Client, name: &str) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    match nodes.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `spec.podCIDRs` of the node.
pub fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

/// `(status, reason)` of the node's condition of type `kind`.
pub fn condition(node: &Node, kind: &str) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The node, or `None` when it does not exist.
pub async fn get_node(client: &Client, name: &str) -> anyhow::Result<Option<Node>> {
    Ok(Api::<Node>::all(client.clone()).get_opt(name).await?)
}

/// Whether the node carries a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// A label value of the node.
pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// `(type, address)` pairs of the node's status.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Events (events.k8s.io/v1) about the node, in any namespace.
pub async fn node_events(admin: &Client, name: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::all(admin.clone());
    let list = events.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Node") && r.name.as_deref() == Some(name)
            })
        })
        .collect())
}

#[derive(Deserialize)]
struct Kind {
    kind: String,
}

/// Applies a multi-document manifest of RBAC objects (server-side apply as `stratus-tests`).
pub async fn apply_rbac_manifest(admin: &Client, path: &Path) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let pp = PatchParams::apply("stratus-tests").force();
    let mut applied = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let kind: Kind = serde_yaml::from_value(value.clone())?;
        macro_rules! apply {
            ($t:ty, $api:expr) => {{
                let obj: $t = serde_yaml::from_value(value)?;
                let name = obj
                    .metadata
                    .name
                    .clone()
                    .context("manifest object without name")?;
                $api.patch(&name, &pp, &Patch::Apply(&obj))
                    .await
                    .with_context(|| format!("apply {} {name}", kind.kind))?;
            }};
        }
        match kind.kind.as_str() {
            "ClusterRole" => apply!(ClusterRole, Api::<ClusterRole>::all(admin.clone())),
            "ClusterRoleBinding" => apply!(
                ClusterRoleBinding,
                Api::<ClusterRoleBinding>::all(admin.clone())
            ),
            "ServiceAccount" => apply!(
                ServiceAccount,
                Api::<ServiceAccount>::namespaced(admin.clone(), "kube-system")
            ),
            "Role" => apply!(Role, Api::<Role>::namespaced(admin.clone(), "kube-system")),
            "RoleBinding" => apply!(
                RoleBinding,
                Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
            ),
            other => anyhow::bail!(
                "{}: unexpected kind {other} in an RBAC manifest",
                path.display()
            ),
        }
        applied += 1;
    }
    Ok(applied)
}

/// An Opaque Secret `name` holding `data` (keys and their text), in no namespace yet (the API
/// it is created through gives it one).
pub fn opaque_secret(name: &str, data: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        k8s_openapi::ByteString(v.as_bytes().to_vec()),
                    )
                })
                .collect(),
        ),
        ..Default::default()
    }
}

/// `helm template <release> <chart> -n <namespace> -f <values>…`: the rendered documents.
pub fn helm_template(
    chart: &Path,
    release: &str,
    namespace: &str,
    values: &[&Path],
) -> anyhow::Result<Vec<serde_json::Value>> {
    let helm = stratus_testenv::ensure_installed()?.helm;
    let out = std::process::Command::new(helm)
        .args(["template", release, "--namespace", namespace])
        .arg(chart)
        .args(values.iter().flat_map(|v| [Path::new("-f"), v]))
        .output()
        .context("running helm template")?;
    anyhow::ensure!(
        out.status.success(),
        "helm template {}: {}",
        chart.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Server-side applies one object of any kind (its API found by discovery; namespaced objects
/// without a namespace go to `default_namespace`), as `helm install` would create it.
pub async fn apply_object(
    client: &Client,
    object: &kube::api::DynamicObject,
    default_namespace: &str,
) -> anyhow::Result<()> {
    let types = object
        .types
        .as_ref()
        .context("an object without apiVersion/kind")?;
    let gvk = kube::core::GroupVersionKind::try_from(types)?;
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<kube::api::DynamicObject> = match capabilities.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object
                .metadata
                .namespace
                .as_deref()
                .unwrap_or(default_namespace),
            &resource,
        ),
    };
    let name = object
        .metadata
        .name
        .as_deref()
        .context("an object without a name")?;
    api.patch(
        name,
        &PatchParams::apply("stratus-tests").force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", types.kind))?;
    Ok(())
}
