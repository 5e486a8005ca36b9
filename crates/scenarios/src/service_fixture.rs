//! Kubernetes objects of the load-balancer scenarios: ready Nodes backed by instances,
//! LoadBalancer Services, and Events about any object.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

/// Creates a Node that is initialised (providerID set, no taint) and Ready.
pub async fn create_ready_node(
    admin: &Client,
    name: &str,
    provider_id: &str,
    labels: BTreeMap<String, String>,
) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    node.metadata.labels = Some(labels);
    node.spec = Some(NodeSpec {
        provider_id: Some(provider_id.to_string()),
        ..NodeSpec::default()
    });
    nodes.create(&PostParams::default(), &node).await?;
    set_ready(admin, name, true).await
}

/// Sets the node's Ready condition.
pub async fn set_ready(admin: &Client, name: &str, ready: bool) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let condition = NodeCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: Some("Scenario".into()),
        ..NodeCondition::default()
    };
    let patch = json!({"status": {"conditions": [condition]}});
    Ok(nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?)
}

/// Sets or removes one label of a node.
pub async fn set_label(
    admin: &Client,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let patch = json!({"metadata": {"labels": {key: value}}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Deletes a node.
pub async fn delete_node(admin: &Client, name: &str) -> anyhow::Result<()> {
    Api::<Node>::all(admin.clone())
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}

/// Creates a `type: LoadBalancer` Service with TCP ports (the apiserver picks node ports).
pub async fn create_lb_service(
    admin: &Client,
    namespace: &str,
    name: &str,
    ports: &[i32],
    annotations: BTreeMap<String, String>,
) -> anyhow::Result<Service> {
    let api: Api<Service> = Api::namespaced(admin.clone(), namespace);
    let mut svc = Service::default();
    svc.metadata.name = Some(name.to_string());
    svc.metadata.annotations = Some(annotations);
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some(BTreeMap::from([("app".to_string(), name.to_string())])),
        ports: Some(
            ports
                .iter()
                .map(|p| ServicePort {
                    name: Some(format!("p{p}")),
                    port: *p,
                    protocol: Some("TCP".into()),
                    ..ServicePort::default()
                })
                .collect(),
        ),
        ..ServiceSpec::default()
    });
    Ok(api.create(&PostParams::default(), &svc).await?)
}

/// The Service, or `None` when it does not exist.
pub async fn get_service(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<Service>> {
    Ok(Api::<Service>::namespaced(admin.clone(), namespace)
        .get_opt(name)
        .await?)
}

/// Applies a JSON merge patch to a Service.
pub async fn patch_service(
    admin: &Client,
    namespace: &str,
    name: &str,
    patch: serde_json::Value,
) -> anyhow::Result<Service> {
    Ok(Api::<Service>::namespaced(admin.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?)
}

/// Deletes a Service.
pub async fn delete_service(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    Api::<Service>::namespaced(admin.clone(), namespace)
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}

/// The first ingress hostname of a Service.
pub fn ingress_hostname(svc: &Service) -> Option<String> {
    svc.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .hostname
        .clone()
}

/// The first ingress of a LoadBalancer Service's status: its IP, else its host name.
pub fn ingress_address(svc: &Service) -> Option<String> {
    let first = svc
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?;
    first.ip.clone().or_else(|| first.hostname.clone())
}

/// Events (events.k8s.io/v1) about the object of `kind` and `name`, in any namespace.
pub async fn events_about(admin: &Client, kind: &str, name: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::all(admin.clone());
    let list = events.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect())
}

/// The default load-balancer name of a Service (`a` + UID without dashes, 32 characters).
pub fn load_balancer_name(svc: &Service) -> String {
    let uid = svc.metadata.uid.clone().unwrap_or_default();
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}
