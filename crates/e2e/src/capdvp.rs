//! capdvp on the real node: its parent identity (the shipped `deploy/dvp/capdvp-parent-rbac.yaml`
//! Role and ClusterRole, a VM class and an image in the parent), the values of
//! `charts/capdvp-controller-manager` for one replica watching the suite's namespace, and the
//! Cluster API objects of one cluster — a Cluster over a DeckhouseCluster, a bootstrap Secret and
//! a MachineDeployment of one machine from a DeckhouseMachineTemplate — that the real Cluster API
//! manager turns into a Machine and a DeckhouseMachine for capdvp.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};
use stratus_scenarios::capdvp_bed::{create_prerequisites, CLASS, IMAGE};
use stratus_testenv::node::forward::NodeForward;

use crate::dvp::{Parent, NAMESPACE, PARENT_SECRET_KEY};

/// The namespace of the Cluster API objects (capdvp watches it).
pub const CAPI_NAMESPACE: &str = "capi-e2e";
/// The Cluster.
pub const CLUSTER: &str = "e2e";
/// The MachineDeployment and its template.
pub const POOL: &str = "workers";
/// `--cluster-uuid`: the `dvp.deckhouse.io/cluster-uuid` label of capdvp's parent objects.
pub const CLUSTER_UUID: &str = "2d4c9f0e-5b7a-4e1f-9c3d-8a6b1e0f7c25";
/// capdvp's ServiceAccount in the parent (as the shipped manifest names it).
pub const PARENT_ACCOUNT: &str = "stratus-capdvp";
/// The Secret in `kube-system` holding capdvp's parent kubeconfig, base64.
pub const PARENT_SECRET: &str = "capdvp-parent";
/// The shipped parent RBAC.
pub const PARENT_RBAC: &str = "deploy/dvp/capdvp-parent-rbac.yaml";
/// The label selecting capdvp's pods.
pub const SELECTOR: &str = "app=capdvp-controller-manager";

/// Prepares the parent for capdvp — the VM class and the image its machines use, its
/// ServiceAccount bound to the shipped Role and ClusterRole — and returns its kubeconfig
/// through `relay`.
pub async fn parent_identity(parent: &Parent, relay: &NodeForward) -> Result<String> {
    create_prerequisites(&parent.admin, NAMESPACE).await?;
    parent
        .kubeconfig_under(PARENT_ACCOUNT, PARENT_RBAC, relay)
        .await
}

/// Values of `charts/capdvp-controller-manager`: one replica of the image imported into the
/// node, watching [`CAPI_NAMESPACE`], the parent's kubeconfig from [`PARENT_SECRET`].
pub fn values() -> Value {
    json!({
        "image": {"pullPolicy": "Never"},
        "replicas": 1,
        "clusterUUID": CLUSTER_UUID,
        "watchNamespace": CAPI_NAMESPACE,
        "dvp": {
            "parentKubeconfigSecret": {"name": PARENT_SECRET, "key": PARENT_SECRET_KEY},
            "namespace": NAMESPACE,
        },
    })
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Cluster API's Cluster.
pub fn clusters() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters")
}

/// Cluster API's Machine.
pub fn machines() -> ApiResource {
    resource("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
}

/// Cluster API's MachineDeployment.
pub fn machine_deployments() -> ApiResource {
    resource(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
        "machinedeployments",
    )
}

/// The Cluster API objects of [`CLUSTER`] with a MachineDeployment of `replicas`, in the order
/// they are applied: the DeckhouseCluster, the Cluster, the DeckhouseMachineTemplate (the
/// parent's VM class and image) and the MachineDeployment.
pub fn cluster_objects(replicas: i32) -> Vec<(ApiResource, Value)> {
    let infra = "infrastructure.cluster.x-k8s.io";
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "pool": POOL});
    vec![
        (
            resource(infra, "v1alpha1", "DeckhouseCluster", "deckhouseclusters"),
            json!({
                "apiVersion": format!("{infra}/v1alpha1"), "kind": "DeckhouseCluster",
                "metadata": {"name": CLUSTER},
                "spec": {"controlPlaneEndpoint": {"host": "10.30.1.10", "port": 6443}}
            }),
        ),
        (
            clusters(),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": CLUSTER},
                "spec": {"infrastructureRef": {"apiGroup": infra, "kind": "DeckhouseCluster", "name": CLUSTER}}
            }),
        ),
        (
            resource(
                infra,
                "v1alpha1",
                "DeckhouseMachineTemplate",
                "deckhousemachinetemplates",
            ),
            json!({
                "apiVersion": format!("{infra}/v1alpha1"), "kind": "DeckhouseMachineTemplate",
                "metadata": {"name": POOL},
                "spec": {"template": {"spec": {
                    "vmClassName": CLASS, "cpu": {"cores": 2}, "memory": "2Gi",
                    "rootDiskSize": "10Gi", "rootDiskStorageClass": "fast",
                    "bootDiskImageRef": {"kind": "VirtualImage", "name": IMAGE}
                }}}
            }),
        ),
        (
            machine_deployments(),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                "metadata": {"name": POOL, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
                "spec": {
                    "clusterName": CLUSTER, "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
                    "deletion": {"order": "Oldest"},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "clusterName": CLUSTER,
                            "bootstrap": {"dataSecretName": "bootstrap-data"},
                            "infrastructureRef": {"apiGroup": infra, "kind": "DeckhouseMachineTemplate", "name": POOL}
                        }
                    }
                }
            }),
        ),
    ]
}

/// Creates [`CAPI_NAMESPACE`] (before the chart: its Role lives there).
pub async fn create_namespace(client: &kube::Client) -> Result<()> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(CAPI_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {CAPI_NAMESPACE}"))?;
    Ok(())
}

/// Creates the bootstrap Secret and applies [`cluster_objects`] in [`CAPI_NAMESPACE`].
pub async fn create_cluster(client: &kube::Client, replicas: i32) -> Result<()> {
    let bootstrap = Secret {
        metadata: ObjectMeta {
            name: Some("bootstrap-data".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(
            [(
                "value".to_owned(),
                "#cloud-config\nruncmd: [echo hi]\n".to_owned(),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), CAPI_NAMESPACE)
        .create(&PostParams::default(), &bootstrap)
        .await
        .context("creating the bootstrap Secret")?;
    for (resource, object) in cluster_objects(replicas) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let object: DynamicObject = serde_json::from_value(object)?;
        Api::<DynamicObject>::namespaced_with(client.clone(), CAPI_NAMESPACE, &resource)
            .patch(
                &name,
                &PatchParams::apply("stratus-e2e").force(),
                &Patch::Apply(&object),
            )
            .await
            .with_context(|| format!("applying {} {name}", resource.kind))?;
    }
    Ok(())
}

/// Sets the MachineDeployment's replicas.
pub async fn scale(client: &kube::Client, replicas: i32) -> Result<()> {
    Api::<DynamicObject>::namespaced_with(client.clone(), CAPI_NAMESPACE, &machine_deployments())
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .with_context(|| format!("scaling MachineDeployment {POOL} to {replicas}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_deployment_clones_the_template_of_the_cluster() {
        let objects = cluster_objects(1);
        let kinds: Vec<&str> = objects.iter().map(|(r, _)| r.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "DeckhouseCluster",
                "Cluster",
                "DeckhouseMachineTemplate",
                "MachineDeployment"
            ]
        );
        let deployment = &objects[3].1["spec"];
        assert_eq!(deployment["replicas"], 1);
        // Cluster API v1beta2 refuses a MachineDeployment without a rollout strategy.
        assert_eq!(deployment["rollout"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(
            deployment["template"]["spec"]["infrastructureRef"]["name"],
            objects[2].1["metadata"]["name"]
        );
        assert_eq!(
            deployment["selector"]["matchLabels"],
            deployment["template"]["metadata"]["labels"]
        );
    }

    #[test]
    fn values_watch_the_suites_namespace_with_capdvps_own_secret() {
        let values = values();
        assert_eq!(values["watchNamespace"], CAPI_NAMESPACE);
        assert_eq!(
            values["dvp"]["parentKubeconfigSecret"]["name"],
            PARENT_SECRET
        );
        assert_eq!(values["replicas"], 1);
    }
}
