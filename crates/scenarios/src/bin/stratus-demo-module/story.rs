//! The steps every module demo tells once its chart is installed, whatever the cloud: a Node
//! initialised by the CCM, a CSI driver's controller pod (the driver with the upstream
//! csi-provisioner and csi-attacher, the chart's arguments and RBAC, kube-controller-manager's
//! volume controllers), a claim that names no class bound through the module's default and
//! attached, and a LoadBalancer Service's ingress.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Service};
use kube::api::{Api, PostParams};
use serde_json::json;
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{Chart, ControllerSide, Kcm, Pod, Sidecar, Tools};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::service_fixture::{
    create_lb_service, get_service, ingress_address, set_ready,
};
use stratus_scenarios::table::node_table;
use stratus_scenarios::wait_for;
use stratus_testenv::KubeCluster;
use tokio::time::Instant;

use super::{indent, WAIT};

/// Registers Node `node` uninitialised as its kubelet would, starts the cloud-controller-manager
/// with `args` as its ServiceAccount (bound by `deploy/rbac.yaml`; `vars` its environment,
/// `identity` says where else it is bound) and shows the Node once initialised. The CCM runs
/// until dropped.
pub async fn ccm_initialises(
    cluster: &KubeCluster,
    admin: &kube::Client,
    node: &str,
    args: &[String],
    vars: Vec<(String, String)>,
    identity: &str,
) -> anyhow::Result<CcmProcess> {
    println!("==> the kubelet of {node} registers its uninitialised Node");
    kube_fixture::create_uninitialized_node(admin, node, &[], BTreeMap::new()).await?;
    kube_fixture::apply_rbac_manifest(admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    println!("==> running the cloud-controller-manager as system:serviceaccount:kube-system:cloud-controller-manager{identity}");
    let ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        cluster,
        vars,
        args,
    )?;
    wait_initialised(admin, node, &ccm).await?;
    Ok(ccm)
}

/// Waits until the CCM has initialised Node `name` and shows it.
async fn wait_initialised(
    admin: &kube::Client,
    name: &str,
    ccm: &CcmProcess,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let nodes = Api::<Node>::all(admin.clone());
    let initialised = wait_for("the Node initialised", WAIT, || async {
        let node = nodes.get(name).await?;
        Ok((!has_taint(&node, UNINITIALIZED)).then_some(node))
    })
    .await
    .with_context(|| ccm.log())?;
    println!("    initialised in {:.2}s", t0.elapsed().as_secs_f64());
    println!("{}", indent(&node_table(&[initialised])));
    Ok(())
}

/// A CSI driver's controller pod on `cluster`, running until dropped.
pub struct ControllerPod {
    /// Where the processes log.
    pub dir: PathBuf,
    _side: ControllerSide,
    _pod: Pod,
}

impl ControllerPod {
    /// Starts `binary` (a sibling of this demo) with `args` and `envs` behind the upstream
    /// provisioner and attacher of `chart`, logging under `dir`; `args` may name the socket as
    /// `{socket}`.
    pub async fn start(
        cluster: &KubeCluster,
        tools: &Tools,
        chart: &Chart,
        binary: &str,
        args: &[&str],
        envs: &[(String, String)],
        dir: PathBuf,
    ) -> anyhow::Result<ControllerPod> {
        println!("\n==> {binary}'s controller with csi-provisioner and csi-attacher (upstream, the chart's arguments, as its ServiceAccount) and kube-controller-manager's volume controllers");
        std::fs::create_dir_all(&dir)?;
        let side = ControllerSide::start(
            cluster,
            tools,
            chart,
            Kcm::default(),
            &[Sidecar::Provisioner, Sidecar::Attacher],
            &dir,
        )
        .await?;
        let endpoint = format!("unix://{}", driver::socket(&dir).display());
        let mut all = vec![format!("--endpoint={endpoint}")];
        all.extend(args.iter().map(|a| a.to_string()));
        let (process, socket) = driver::start(&sibling_binary(binary)?, &dir, &all, envs).await?;
        let pod = side.start_pod(process, &socket)?;
        Ok(ControllerPod {
            dir,
            _side: side,
            _pod: pod,
        })
    }

    /// The tails of the pod's logs, for a failure.
    pub fn logs(&self) -> String {
        csi_flow::log_tails(&self.dir, &csi_flow::CONTROLLER_LOGS)
    }

    /// Creates claim `data` of `gib` GiB naming no class, placed on `node` as the scheduler
    /// would; shows the class the apiserver gave it and waits until it is bound. Returns the
    /// claims' handle, the PV and the driver's volume ID.
    pub async fn claim_bound(
        &self,
        admin: &kube::Client,
        node: &str,
        gib: u32,
        driver: &str,
        device_key: &str,
    ) -> anyhow::Result<(Claims, String, String, f64)> {
        println!("==> a PersistentVolumeClaim that names no class, scheduled to {node}");
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": node}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": format!("{gib}Gi")}}}
        }))?;
        let created = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default")
            .create(&PostParams::default(), &claim)
            .await?;
        let class = created
            .spec
            .and_then(|s| s.storage_class_name)
            .context("no default class was given")?;
        println!("    storageClassName: {class} (the module's default, given by the apiserver)");
        let claims = Claims {
            admin: admin.clone(),
            driver: driver.into(),
            class,
            device_key: device_key.into(),
        };
        let t0 = Instant::now();
        let (pv, volume) = claims
            .wait_bound("data", WAIT)
            .await
            .with_context(|| self.logs())?;
        Ok((claims, pv, volume, t0.elapsed().as_secs_f64()))
    }

    /// Attaches `pv` to `node` as kube-controller-manager's attach-detach controller would for a
    /// pod; returns the device path the driver published and the seconds it took.
    pub async fn attached(
        &self,
        claims: &Claims,
        pv: &str,
        node: &str,
    ) -> anyhow::Result<(String, f64)> {
        println!("==> a VolumeAttachment for {pv} on {node}, as kube-controller-manager's attach-detach controller makes for a pod");
        let t0 = Instant::now();
        claims.attach("data-attachment", pv, node).await?;
        let device = claims
            .wait_attached("data-attachment", WAIT)
            .await
            .with_context(|| self.logs())?;
        Ok((device, t0.elapsed().as_secs_f64()))
    }
}

/// Marks `node` Ready as its kubelet would, creates Service `default/web` of type LoadBalancer
/// on port 80 and waits for its ingress (an IP or a host name); returns the Service, the ingress
/// and the seconds it took.
pub async fn service_ingress(
    admin: &kube::Client,
    node: &str,
    ccm: &CcmProcess,
) -> anyhow::Result<(Service, String, f64)> {
    println!("\n==> the kubelet reports Ready; Service default/web, type LoadBalancer, port 80");
    set_ready(admin, node, true).await?;
    create_lb_service(admin, "default", "web", &[80], BTreeMap::new()).await?;
    let t0 = Instant::now();
    let (svc, ingress) = wait_for("ingress of default/web", WAIT, || async {
        Ok(get_service(admin, "default", "web")
            .await?
            .and_then(|s| ingress_address(&s).map(|ingress| (s, ingress))))
    })
    .await
    .with_context(|| ccm.log())?;
    Ok((svc, ingress, t0.elapsed().as_secs_f64()))
}
