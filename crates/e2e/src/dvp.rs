//! The DVP side of the end-to-end suite: the parent (virtualization) cluster — a testenv
//! kube-apiserver inside the test's network namespace carrying the generated
//! `virtualization.deckhouse.io` CRDs, the ServiceWithHealthchecks and ModuleConfig CRDs, the
//! tenant project's namespace and the platform simulator — holding a VirtualMachine labelled
//! with the real node's name whose address is the node IP; the CCM's parent identity under the
//! shipped Role, its kubeconfig pointing at the parent through a relay on the node IP; and the
//! values that run the cloud-controller-manager chart for DVP as the module chart does, and the
//! DVP CSI driver's chart on the real node (its own parent identity, test-only loop devices).

use std::path::Path;

use anyhow::{Context, Result};
use base64::Engine as _;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::{json, Value};
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::{parent_role_rules, rules_in};
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::dvp::{module_config_crd, swhc_crd, tenant, PlatformSim};
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::netns::NODE_IP;
use stratus_testenv::node::NODE_NAME;
use stratus_testenv::tools::virtualization_crds;
use stratus_testenv::{Identity, KubeCluster};

use crate::volumes::sidecar_image;

/// The tenant project's namespace in the parent.
pub const NAMESPACE: &str = "tenant-e2e";
/// The node's VirtualMachine (the Node's provider ID is `dvp://<it>`).
pub const NODE_VM: &str = "e2e-node";
/// The CCM's ServiceAccount in the parent (as `deploy/dvp/parent-rbac.yaml` names it).
pub const CCM_PARENT_ACCOUNT: &str = "stratus-dvp-cloud-controller-manager";
/// The Secret in `kube-system` holding the parent kubeconfig, base64 (the module's `dvp-parent`).
pub const PARENT_SECRET: &str = "dvp-parent";
/// The Secret's key (the chart's default).
pub const PARENT_SECRET_KEY: &str = "kubeconfig-base64";
/// The name the chart gives the DaemonSet and its pods.
pub const CCM_NAME: &str = "dvp-cloud-controller-manager";
/// The CSI driver's ServiceAccount in the parent (as `deploy/dvp/csi-parent-rbac.yaml` names it).
pub const CSI_PARENT_ACCOUNT: &str = "stratus-dvp-csi-driver";
/// The CSI driver's shipped parent RBAC.
pub const CSI_PARENT_RBAC: &str = "deploy/dvp/csi-parent-rbac.yaml";
/// The Secret in `kube-system` holding the CSI driver's parent kubeconfig, base64.
pub const CSI_PARENT_SECRET: &str = "dvp-csi-parent";
/// The directory under the kubelet's root holding the loop devices' backing files.
pub const CSI_LOOPS_DIR: &str = "stratus-dvp-loops";

/// The parent cluster and its simulator; dropping it stops both.
pub struct Parent {
    /// The simulator (dropped first: it watches the parent).
    pub sim: PlatformSim,
    /// The parent's apiserver.
    pub cluster: KubeCluster,
    /// A client of the parent as its administrator (the platform).
    pub admin: kube::Client,
}

impl Parent {
    /// Generates the virtualization CRDs if needed, starts the parent's apiserver, installs the
    /// CRDs, creates the tenant namespace and starts the simulator over it.
    pub async fn start() -> Result<Parent> {
        let crds = tokio::task::spawn_blocking(virtualization_crds::ensure_virtualization_crds)
            .await
            .context("CRD generation task panicked")??;
        let cluster = KubeCluster::start()
            .await
            .context("the parent's apiserver")?;
        let admin = cluster.kube_client(Identity::Admin).await?;
        virtualization_crds::install_virtualization_crds(&admin, &crds).await?;
        swhc_crd::install(&admin).await?;
        module_config_crd::install(&admin).await?;
        wait_established(&admin, swhc_crd::NAME).await?;
        wait_established(&admin, module_config_crd::NAME).await?;
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating the parent namespace {NAMESPACE}"))?;
        let sim = PlatformSim::start(admin.clone(), NAMESPACE);
        Ok(Parent {
            sim,
            cluster,
            admin,
        })
    }

    /// The VMs of the tenant namespace, as the platform's administrator.
    pub fn fixture(&self) -> DvpFixture {
        DvpFixture::new(self.admin.clone(), NAMESPACE, "e2e")
    }

    /// Creates [`NODE_VM`], labelled with the node's name as capdvp labels a VM, which the
    /// simulator runs with the node IP; returns once it runs with that address.
    pub async fn node_vm(&self) -> Result<()> {
        self.sim.set_knobs(|k| {
            k.vm_addresses
                .insert(NODE_VM.to_owned(), NODE_IP.to_string());
        });
        let fixture = self.fixture();
        fixture.create_vm(NODE_VM, NODE_NAME).await?;
        let ip = fixture.running_ip(NODE_VM).await?;
        anyhow::ensure!(
            ip == NODE_IP.to_string(),
            "VM {NODE_VM} runs with {ip}, not the node IP"
        );
        Ok(())
    }

    /// A component's identity in the parent — the ServiceAccount `account` of the tenant
    /// namespace bound to a Role `account` with `rules` (a shipped manifest's) — as a kubeconfig
    /// whose server is `relay` (a relay on the node IP to the parent's loopback apiserver, as a
    /// remote parent is reached from the node and from the pod network).
    pub async fn kubeconfig_for(
        &self,
        account: &str,
        rules: Vec<PolicyRule>,
        relay: &NodeForward,
    ) -> Result<String> {
        let token = tenant::bind_account(&self.admin, NAMESPACE, account, account, rules).await?;
        let server = format!("https://{}", relay.address());
        Ok(tenant::kubeconfig_yaml(&server, &token, NAMESPACE))
    }

    /// A component's identity in the parent under a shipped manifest's Role and ClusterRole:
    /// [`Parent::kubeconfig_for`] with the Role's rules, and the ClusterRole's rules bound to the
    /// same ServiceAccount (as `<account>-cluster-reads`).
    pub async fn kubeconfig_under(
        &self,
        account: &str,
        manifest: &str,
        relay: &NodeForward,
    ) -> Result<String> {
        let kubeconfig = self
            .kubeconfig_for(account, rules_in(manifest, "Role")?, relay)
            .await?;
        let name = format!("{account}-cluster-reads");
        let meta = ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        };
        let role = ClusterRole {
            metadata: meta.clone(),
            rules: Some(rules_in(manifest, "ClusterRole")?),
            ..ClusterRole::default()
        };
        Api::<ClusterRole>::all(self.admin.clone())
            .create(&PostParams::default(), &role)
            .await
            .with_context(|| format!("creating ClusterRole {name}"))?;
        let binding = ClusterRoleBinding {
            metadata: meta,
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: name.clone(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: account.into(),
                namespace: Some(NAMESPACE.into()),
                ..Subject::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(self.admin.clone())
            .create(&PostParams::default(), &binding)
            .await
            .with_context(|| format!("binding ClusterRole {name}"))?;
        Ok(kubeconfig)
    }

    /// The CCM's identity in the parent, under the shipped Role of `deploy/dvp/parent-rbac.yaml`.
    pub async fn ccm_kubeconfig(&self, relay: &NodeForward) -> Result<String> {
        self.kubeconfig_for(CCM_PARENT_ACCOUNT, parent_role_rules()?, relay)
            .await
    }

    /// The CSI driver's identity in the parent, under the shipped Role of
    /// [`CSI_PARENT_RBAC`].
    pub async fn csi_kubeconfig(&self, relay: &NodeForward) -> Result<String> {
        self.kubeconfig_for(
            CSI_PARENT_ACCOUNT,
            rules_in(CSI_PARENT_RBAC, "Role")?,
            relay,
        )
        .await
    }

    /// The parent apiserver's loopback address (what a relay forwards to).
    pub fn apiserver_address(&self) -> Result<std::net::SocketAddr> {
        let url = self.cluster.apiserver_url();
        url.trim_start_matches("https://")
            .parse()
            .with_context(|| format!("the parent apiserver URL {url} is not https://IP:PORT"))
    }
}

/// The Secret `kube-system/<name>` holding `kubeconfig` base64-encoded under
/// [`PARENT_SECRET_KEY`], as Deckhouse hands the parent's kubeconfig to the DVP components.
pub fn parent_secret(name: &str, kubeconfig: &str) -> Secret {
    let encoded = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        string_data: Some([(PARENT_SECRET_KEY.to_owned(), encoded)].into()),
        ..Secret::default()
    }
}

/// Values of `charts/cloud-controller-manager` for DVP as the module chart
/// (`charts/cloud-provider-dvp`) sets them: `--cloud-provider=dvp`, the parent kubeconfig from
/// [`PARENT_SECRET`] and the tenant namespace (the chart turns them into
/// `DVP_KUBERNETES_CONFIG_BASE64` and `DVP_NAMESPACE`), the image imported into the node.
pub fn ccm_values() -> Value {
    json!({
        "nameOverride": CCM_NAME,
        "image": {"pullPolicy": "Never"},
        "args": ["--v=2", "--cloud-provider=dvp"],
        "dvp": {
            "parentKubeconfigSecret": {"name": PARENT_SECRET, "key": PARENT_SECRET_KEY},
            "namespace": NAMESPACE,
        },
    })
}

/// Values of `charts/dvp-csi-driver` on the real node whose kubelet's root is `kubelet`: one
/// controller replica with the parent kubeconfig from [`CSI_PARENT_SECRET`], the tenant namespace
/// and `cluster_uuid`; the upstream controller sidecars testenv builds; the images imported into
/// the node; the node plugin under the cluster's kubelet root, each volume a loop device backed
/// by a file in [`CSI_LOOPS_DIR`] there (the test-only `--loop-devices-dir`).
pub fn csi_values(kubelet: &Path, cluster_uuid: &str) -> Result<Value> {
    let sidecar = |name: &str| sidecar_image(name).map(|image| json!({"image": image}));
    Ok(json!({
        "image": {"pullPolicy": "Never"},
        "clusterUUID": cluster_uuid,
        "dvp": {
            "parentKubeconfigSecret": {"name": CSI_PARENT_SECRET, "key": PARENT_SECRET_KEY},
            "namespace": NAMESPACE,
        },
        "sidecars": {
            "provisioner": sidecar("csi-provisioner")?,
            "attacher": sidecar("csi-attacher")?,
            "resizer": sidecar("csi-resizer")?,
            "nodeDriverRegistrar": {"image": {"pullPolicy": "Never"}},
            "livenessProbe": {"image": {"pullPolicy": "Never"}},
        },
        "controller": {"replicas": 1},
        "node": {
            "kubeletPath": kubelet.display().to_string(),
            "additionalArgs": [format!("--loop-devices-dir={}", kubelet.join(CSI_LOOPS_DIR).display())],
        },
    }))
}

/// The parent Service's name for the tenant Service with UID `uid`, by Deckhouse's rule: `a`
/// and the UID's letters and digits, cut to 32 characters.
pub fn parent_service_name(uid: &str) -> String {
    std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_service_is_named_by_deckhouses_rule() {
        assert_eq!(
            parent_service_name("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
            "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
        );
    }

    #[test]
    fn the_secret_holds_the_kubeconfig_base64_under_the_charts_key() {
        let secret = parent_secret(PARENT_SECRET, "apiVersion: v1\n");
        let value = &secret.string_data.unwrap()[PARENT_SECRET_KEY];
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value)
            .unwrap();
        assert_eq!(decoded, b"apiVersion: v1\n");
        assert_eq!(secret.metadata.name.as_deref(), Some(PARENT_SECRET));
    }

    #[test]
    fn csi_values_put_the_node_plugin_under_the_kubelet_root() {
        let values = csi_values(Path::new("/tmp/k/kubelet"), "uuid-1").unwrap();
        assert_eq!(
            values["node"]["additionalArgs"][0],
            "--loop-devices-dir=/tmp/k/kubelet/stratus-dvp-loops"
        );
        assert_eq!(values["node"]["kubeletPath"], "/tmp/k/kubelet");
        assert_eq!(
            values["dvp"]["parentKubeconfigSecret"]["name"],
            CSI_PARENT_SECRET
        );
        assert_eq!(values["clusterUUID"], "uuid-1");
        let provisioner = values["sidecars"]["provisioner"]["image"].as_str().unwrap();
        assert!(
            provisioner.starts_with("registry.k8s.io/sig-storage/csi-provisioner:"),
            "{provisioner}"
        );
    }

    #[test]
    fn values_name_the_dvp_provider_and_the_parent_secret() {
        let values = ccm_values();
        assert_eq!(values["args"][1], "--cloud-provider=dvp");
        assert_eq!(
            values["dvp"]["parentKubeconfigSecret"]["name"],
            PARENT_SECRET
        );
        assert_eq!(values["dvp"]["namespace"], NAMESPACE);
        assert!(
            values.get("cloudConfig").is_none(),
            "DVP needs no cloud.conf"
        );
    }
}
