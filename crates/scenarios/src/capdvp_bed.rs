//! The capdvp test bed: a DvpEnv (tenant = the management cluster, parent with the simulator),
//! capdvp's CRDs from the chart, a VM class and an image in the parent, capdvp's parent identity
//! bound to exactly `deploy/dvp/capdvp-parent-rbac.yaml` and its management identity to exactly
//! the chart's rules; optionally the real Cluster API manager; and the Cluster API objects of
//! one cluster (Cluster, DeckhouseCluster, bootstrap Secret, DeckhouseMachineTemplate,
//! MachineDeployment) with helpers to scale and to count what the parent holds. capdvp's tests
//! and `stratus-bench-capdvp` run on it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use serde_json::json;
use stratus_capdvp::api::DeckhouseMachine;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};

use crate::ccm::CcmProcess;
use crate::dvp_rbac::rules_in;
use crate::kube_fixture::repo_root;
use stratus_testenv::core::capi::{install_crds, ClusterApiManager};
use stratus_testenv::{DvpEnv, Identity};

/// The parent RBAC manifest.
pub const PARENT_RBAC: &str = "deploy/dvp/capdvp-parent-rbac.yaml";
/// The management rules of the chart.
pub const MANAGEMENT_RULES: &str = "charts/capdvp-controller-manager/files/management-rules.yaml";
/// capdvp's ServiceAccount in the parent.
pub const PARENT_ACCOUNT: &str = "stratus-capdvp";
/// The namespace of the Cluster API objects.
pub const NS: &str = "capi-test";
/// The cluster.
pub const CLUSTER: &str = "dvp";
/// The VM class that exists in the parent.
pub const CLASS: &str = "generic";
/// The image that exists in the parent.
pub const IMAGE: &str = "ubuntu";
/// The management identity capdvp runs as (bound to the chart's rules by the test bed).
pub const MGMT_USER: Identity = Identity::CloudControllerManager;

/// The test bed.
pub struct Bed {
    /// Both clusters and the simulator.
    pub env: DvpEnv,
    /// Management admin.
    pub mgmt: kube::Client,
    /// Parent admin.
    pub parent: kube::Client,
    /// capdvp's parent environment (DVP_KUBERNETES_CONFIG_BASE64, DVP_NAMESPACE).
    pub vars: Vec<(String, String)>,
    /// The real Cluster API manager, when asked for.
    pub capi: Option<ClusterApiManager>,
    /// The capdvp-controller-manager binary [`Bed::start_capdvp`] runs.
    pub binary: PathBuf,
}

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The DeckhouseMachineTemplate resource.
pub fn machine_templates() -> ApiResource {
    dynamic(
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "DeckhouseMachineTemplate",
        "deckhousemachinetemplates",
    )
}

/// The MachineDeployment resource.
pub fn machine_deployments() -> ApiResource {
    dynamic(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
        "machinedeployments",
    )
}

/// The Machine resource.
pub fn machines() -> ApiResource {
    dynamic("cluster.x-k8s.io", "v1beta2", "Machine", "machines")
}

/// Reads rules of a manifest's first `kind`.
pub fn rules(manifest: &str, kind: &str) -> Vec<PolicyRule> {
    rules_in(manifest, kind).unwrap()
}

/// The chart's management rules.
pub fn management_rules() -> Vec<PolicyRule> {
    let text = std::fs::read_to_string(repo_root().join(MANAGEMENT_RULES)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The rules of the chart's review ClusterRole (secure serving of /metrics).
pub fn review_rules() -> Vec<PolicyRule> {
    let rule = |group: &str, resource: &str| PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: vec!["create".into()],
        ..PolicyRule::default()
    };
    vec![
        rule("authentication.k8s.io", "tokenreviews"),
        rule("authorization.k8s.io", "subjectaccessreviews"),
    ]
}

/// The rules of the chart's leader-election Role.
pub fn lease_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        verbs: vec!["get".into(), "create".into(), "update".into()],
        ..PolicyRule::default()
    }]
}

async fn bind_cluster_role(
    admin: &kube::Client,
    name: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> Result<()> {
    let meta = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta.clone(),
                rules: Some(rules),
                ..ClusterRole::default()
            },
        )
        .await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: name.into(),
                },
                subjects: Some(vec![subject]),
            },
        )
        .await?;
    Ok(())
}

/// Binds `rules` as the Role `name` in `ns` to `subject`.
pub async fn bind_role(
    admin: &kube::Client,
    ns: &str,
    name: &str,
    rules: Vec<PolicyRule>,
    subject: Subject,
) -> Result<()> {
    let meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..ObjectMeta::default()
    };
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(rules),
            },
        )
        .await?;
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: name.into(),
                },
                subjects: Some(vec![subject]),
            },
        )
        .await?;
    Ok(())
}

/// The management subject capdvp runs as.
pub fn mgmt_subject() -> Subject {
    Subject {
        kind: "User".into(),
        name: MGMT_USER.username().into(),
        ..Subject::default()
    }
}

/// Binds capdvp's shipped roles in both clusters; returns its parent environment.
pub async fn bind_shipped(
    env: &DvpEnv,
    mgmt: &kube::Client,
    parent: &kube::Client,
) -> Result<Vec<(String, String)>> {
    let vars = env
        .bound_account_env(PARENT_ACCOUNT, rules(PARENT_RBAC, "Role"))
        .await?;
    bind_cluster_role(
        parent,
        "stratus-capdvp-cluster-reads",
        rules(PARENT_RBAC, "ClusterRole"),
        Subject {
            kind: "ServiceAccount".into(),
            name: PARENT_ACCOUNT.into(),
            namespace: Some(env.namespace().into()),
            ..Subject::default()
        },
    )
    .await?;
    bind_cluster_role(
        mgmt,
        "capdvp-controller-manager",
        management_rules(),
        mgmt_subject(),
    )
    .await?;
    bind_cluster_role(
        mgmt,
        "capdvp-controller-manager-reviews",
        review_rules(),
        mgmt_subject(),
    )
    .await?;
    bind_role(
        mgmt,
        "kube-system",
        "capdvp-leader-election",
        lease_rules(),
        mgmt_subject(),
    )
    .await?;
    Ok(vars)
}

impl Bed {
    /// Starts everything; `with_capi` starts the real Cluster API manager too; `binary` is the
    /// capdvp the bed runs.
    pub async fn start(with_capi: bool, binary: PathBuf) -> Result<Bed> {
        let env = DvpEnv::start().await?;
        let mgmt = env.tenant.kube_client(Identity::Admin).await?;
        let parent = env.parent_admin().await?;
        install_crds(
            &mgmt,
            &repo_root().join("charts/capdvp-controller-manager/crds"),
        )
        .await?;
        let vars = bind_shipped(&env, &mgmt, &parent).await?;
        create_prerequisites(&parent, env.namespace()).await?;
        // capdvp watches Cluster API's Machines and Clusters: their CRDs are always installed
        // (by the manager's start); the manager itself runs when asked for.
        let capi = ClusterApiManager::start(&env.tenant).await?;
        let capi = if with_capi { Some(capi) } else { None };
        Ok(Bed {
            env,
            mgmt,
            parent,
            vars,
            capi,
            binary,
        })
    }

    /// Starts capdvp (management identity bound to the chart's rules, parent identity to the
    /// shipped Role) with `extra` flags.
    pub fn start_capdvp(&self, extra: &[&str]) -> CcmProcess {
        let mut args: Vec<String> = [
            "--cluster-uuid=uuid-1",
            // Short enough that a restarted capdvp takes over within seconds, long enough that
            // a lease renewal slowed by a loaded 2-core machine does not end the process (no
            // kubelet here restarts it).
            "--leader-elect-lease-duration=5s",
            "--leader-elect-renew-deadline=4s",
            "--leader-elect-retry-period=500ms",
            // The probes on loopback, on a port of the kernel's choosing.
            "--health-probe-bind-address=127.0.0.1:0",
            "--v=4",
        ]
        .map(String::from)
        .to_vec();
        // The runtime extension only where a test asks for it (it needs a certificate).
        if !extra.iter().any(|a| a.starts_with("--webhook-port")) {
            args.push("--webhook-port=0".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        CcmProcess::start_on(&self.binary, &self.env.tenant, self.vars.clone(), &args)
            .expect("start capdvp")
    }

    /// Creates the namespace, the Cluster and DeckhouseCluster, the bootstrap Secret, the
    /// template (`class` as its VM class) and a MachineDeployment of `replicas`.
    pub async fn create_cluster(&self, class: &str, replicas: i32) -> Result<()> {
        let pp = PostParams::default();
        let _ = Api::<Namespace>::all(self.mgmt.clone())
            .create(
                &pp,
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some(NS.into()),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                },
            )
            .await;
        Api::<Secret>::namespaced(self.mgmt.clone(), NS)
            .create(
                &pp,
                &Secret {
                    metadata: ObjectMeta {
                        name: Some("bootstrap-data".into()),
                        ..ObjectMeta::default()
                    },
                    string_data: Some(BTreeMap::from([(
                        "value".to_string(),
                        "#cloud-config\nruncmd: [echo hi]\n".to_string(),
                    )])),
                    ..Secret::default()
                },
            )
            .await?;
        self.apply(&dynamic("infrastructure.cluster.x-k8s.io", "v1alpha1", "DeckhouseCluster", "deckhouseclusters"), json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "DeckhouseCluster",
            "metadata": {"name": CLUSTER, "namespace": NS},
            "spec": {"controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}}
        })).await?;
        self.apply(&dynamic("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"), json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": NS},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DeckhouseCluster", "name": CLUSTER}}
        })).await?;
        self.template("workers", class).await?;
        self.machine_deployment("workers", "workers", replicas)
            .await
    }

    /// A DeckhouseMachineTemplate `name` with VM class `class`.
    pub async fn template(&self, name: &str, class: &str) -> Result<()> {
        self.apply(&machine_templates(), json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "DeckhouseMachineTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {
                "vmClassName": class, "cpu": {"cores": 2}, "memory": "2Gi",
                "rootDiskSize": "10Gi", "rootDiskStorageClass": "fast",
                "bootDiskImageRef": {"kind": "VirtualImage", "name": IMAGE},
                "additionalDisks": [{"size": "1Gi", "storageClass": "fast"}]
            }}}
        })).await
    }

    /// Applies `template` (a `DeckhouseMachineTemplate` document, e.g. the module's) into the
    /// bed's namespace.
    pub async fn apply_machine_template(&self, mut template: serde_json::Value) -> Result<()> {
        template["metadata"]["namespace"] = json!(NS);
        self.apply(&machine_templates(), template).await
    }

    /// capdvp's log and the tail of the Cluster API manager's, for a failure.
    pub fn logs(&self, capdvp: &CcmProcess) -> String {
        format!(
            "{}\n--- cluster-api ---\n{}",
            capdvp.log(),
            self.capi
                .as_ref()
                .map(|c| c.log_tail(30))
                .unwrap_or_default()
        )
    }

    /// A MachineDeployment `name` of `replicas` cloning `template`.
    pub async fn machine_deployment(
        &self,
        name: &str,
        template: &str,
        replicas: i32,
    ) -> Result<()> {
        let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "pool": name});
        self.apply(&machine_deployments(), json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
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
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DeckhouseMachineTemplate", "name": template}
                    }
                }
            }
        })).await
    }

    /// Scales the MachineDeployment `name`.
    pub async fn scale(&self, name: &str, replicas: i32) -> Result<()> {
        Api::<DynamicObject>::namespaced_with(self.mgmt.clone(), NS, &machine_deployments())
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        Ok(())
    }

    async fn apply(&self, resource: &ApiResource, object: serde_json::Value) -> Result<()> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let obj: DynamicObject = serde_json::from_value(object)?;
        Api::<DynamicObject>::namespaced_with(self.mgmt.clone(), NS, resource)
            .patch(
                &name,
                &PatchParams::apply("capdvp-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .with_context(|| format!("applying {} {name}", resource.kind))?;
        Ok(())
    }

    /// What the parent holds in the tenant namespace.
    pub async fn parent_counts(&self) -> Result<Counts> {
        let ns = self.env.namespace();
        let lp = ListParams::default();
        let vms = Api::<VirtualMachine>::namespaced(self.parent.clone(), ns)
            .list(&lp)
            .await?
            .items;
        let running = vms
            .iter()
            .filter(|v| v.phase() == Some(stratus_dvp_api::VmPhase::Running))
            .count();
        Ok(Counts {
            vms: vms.len(),
            running,
            disks: Api::<VirtualDisk>::namespaced(self.parent.clone(), ns)
                .list(&lp)
                .await?
                .items
                .len(),
            secrets: Api::<Secret>::namespaced(self.parent.clone(), ns)
                .list(&ListParams::default().labels(stratus_capdvp::names::MACHINE_LABEL))
                .await?
                .items
                .len(),
            attachments: Api::<VirtualMachineBlockDeviceAttachment>::namespaced(
                self.parent.clone(),
                ns,
            )
            .list(&lp)
            .await?
            .items
            .len(),
        })
    }

    /// What is left of the machines, for a failure message: every DeckhouseMachine and Cluster
    /// API Machine with its deletion, finalizers and owner, and the Cluster API manager's log
    /// tail.
    pub async fn machines_report(&self) -> String {
        let mut out = String::from("DeckhouseMachines:\n");
        for dm in self.deckhouse_machines().await.unwrap_or_default() {
            out += &format!(
                "  {} deleting={:?} finalizers={:?} owners={:?} conditions={:?}\n",
                dm.metadata.name.as_deref().unwrap_or_default(),
                dm.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                dm.metadata.finalizers,
                dm.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .map(|o| format!("{}/{}", o.kind, o.name))
                    .collect::<Vec<_>>(),
                dm.status.as_ref().map(|s| s
                    .conditions
                    .iter()
                    .map(|c| format!("{}={}:{}", c.type_, c.status, c.reason))
                    .collect::<Vec<_>>()),
            );
        }
        out += "Machines:\n";
        let machines = Api::<DynamicObject>::namespaced_with(self.mgmt.clone(), NS, &machines())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for m in machines {
            out += &format!(
                "  {} deleting={:?} finalizers={:?} phase={:?}\n",
                m.metadata.name.as_deref().unwrap_or_default(),
                m.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                m.metadata.finalizers,
                m.data.pointer("/status/phase"),
            );
        }
        if let Some(capi) = &self.capi {
            out += &format!(
                "--- Cluster API manager log tail ---\n{}",
                capi.log_tail(60)
            );
        }
        out
    }

    /// The DeckhouseMachines.
    pub async fn deckhouse_machines(&self) -> Result<Vec<DeckhouseMachine>> {
        Ok(Api::<DeckhouseMachine>::namespaced(self.mgmt.clone(), NS)
            .list(&ListParams::default())
            .await?
            .items)
    }
}

/// What the parent holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// VMs.
    pub vms: usize,
    /// Of which running.
    pub running: usize,
    /// Disks.
    pub disks: usize,
    /// capdvp's cloud-init Secrets.
    pub secrets: usize,
    /// VMBDAs.
    pub attachments: usize,
}

/// Creates the VM class and the image machines name.
pub async fn create_prerequisites(parent: &kube::Client, ns: &str) -> Result<()> {
    let pp = PostParams::default();
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": "VirtualMachineClass",
        "metadata": {"name": CLASS},
        "spec": {"cpu": {"type": "Host"}}
    }))?;
    Api::<DynamicObject>::all_with(
        parent.clone(),
        &dynamic(
            stratus_dvp_api::GROUP,
            "v1alpha2",
            "VirtualMachineClass",
            "virtualmachineclasses",
        ),
    )
    .create(&pp, &class)
    .await
    .context("creating the VirtualMachineClass")?;
    let image: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": "VirtualImage",
        "metadata": {"name": IMAGE, "namespace": ns},
        "spec": {"storage": "ContainerRegistry", "dataSource": {"type": "HTTP", "http": {"url": "https://example.com/ubuntu.img"}}}
    }))?;
    Api::<DynamicObject>::namespaced_with(
        parent.clone(),
        ns,
        &dynamic(
            stratus_dvp_api::GROUP,
            "v1alpha2",
            "VirtualImage",
            "virtualimages",
        ),
    )
    .create(&pp, &image)
    .await
    .context("creating the VirtualImage")?;
    Ok(())
}
