//! `make demo MODULE=dvp`: the DVP module on a tenant control plane with a parent virtualization
//! cluster (two kube-apiservers, the platform simulator playing the virtualization controllers).
//! The chart with `examples/cloud-provider-dvp.values.yaml`; the cloud-data-discoverer, under its
//! shipped parent RBAC, lists the parent's StorageClasses; the module controller turns the enabled
//! ones into the tenant's (the parent's default is the module's); then a node group: a
//! `DVPInstanceClass` as the apiserver stores it becomes the module's `DeckhouseMachineTemplate`,
//! and the real Cluster API manager with capdvp scales a MachineDeployment over it to VMs in the
//! parent; one VM's tenant Node initialised by the CCM; a claim with no class provisioned as a
//! VirtualDisk by the upstream csi-provisioner with the DVP driver's controller and hot-plugged
//! into the VM by the upstream csi-attacher; a LoadBalancer Service given a parent Service.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};
use stratus_csi_dvp::DRIVER_NAME as DRIVER;
use stratus_dvp_api::labels::HOSTNAME;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment, VmPhase};
use stratus_module::machine_classes::dvp_node_group_template;
use stratus_scenarios::capdvp_bed::{Bed, CLASS, IMAGE, NS};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::harness::{Tools, DVP_CHART};
use stratus_scenarios::dvp_rbac::{discoverer_parent_identity, parent_role_rules, rules_in};
use stratus_scenarios::wait_for;
use tokio::time::Instant;

use super::story::{self, ControllerPod};
use super::{done, install_chart, run_discoverer};

/// Cluster API and capdvp take a while to bring machines on a loaded laptop.
const MACHINES_WAIT: Duration = Duration::from_secs(120);

pub async fn run() -> anyhow::Result<()> {
    let tools = super::tools().await?;
    println!("==> starting the tenant and the parent control planes (etcd + kube-apiserver each, RBAC on), the virtualization CRDs and simulator, the Cluster API manager");
    let bed = Bed::start(true, sibling_binary("capdvp-controller-manager")?).await?;
    let tenant = &bed.env.tenant;
    for (name, provisioner, default) in [
        (
            "linstor-thin-r1",
            "replicated.csi.storage.deckhouse.io",
            true,
        ),
        ("ceph-rbd", "rbd.csi.ceph.com", false),
        ("local-path", "local.csi.storage.deckhouse.io", false),
    ] {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
            "provisioner": provisioner, "allowVolumeExpansion": true, "volumeBindingMode": "WaitForFirstConsumer"
        }))?;
        Api::<StorageClass>::all(bed.parent.clone())
            .create(&PostParams::default(), &class)
            .await?;
    }
    println!(
        "    the parent's StorageClasses: linstor-thin-r1 (its default), ceph-rbd, local-path"
    );
    // capdvp watches the namespace the demo's Cluster lives in.
    let local = tenant.dir().join("local-cluster.values.yaml");
    std::fs::write(
        &local,
        format!("capdvp-controller-manager:\n  watchNamespace: {NS}\n"),
    )?;
    install_chart(
        &bed.mgmt,
        "dvp",
        &[&local],
        &["charts/cloud-provider-dvp/crds/dvpinstanceclasses.yaml"],
    )
    .await?;

    println!("==> running cloud-data-discoverer as system:serviceaccount:kube-system:cloud-data-discoverer, in the parent as the project's account under deploy/dvp/parent-discoverer-rbac.yaml");
    let parent_identity = discoverer_parent_identity(&bed.env).await?;
    let (discovery, _discoverer) =
        run_discoverer(tenant, &bed.mgmt, "dvp", parent_identity).await?;
    for (key, value) in discovery.data.unwrap_or_default() {
        let doc: Value = serde_json::from_slice(&value.0).unwrap_or_default();
        let classes: Vec<String> = doc["storageClasses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let default = if c["isDefault"] == true {
                    " (default)"
                } else {
                    ""
                };
                format!("{}{default}", c["name"].as_str().unwrap_or("?"))
            })
            .collect();
        println!(
            "    {key}: zones {} · storageClasses {classes:?}",
            doc["zones"]
        );
    }

    let _controller = super::classes_and_registration(
        tenant,
        &bed.mgmt,
        "dvp",
        2,
        "one per enabled parent class, local-.* excluded by the settings; the parent's default is the module's",
        "",
    )
    .await?;

    node_group(&bed).await?;
    let (node, ccm) = node(&bed).await?;
    volume(&bed, &tools, &node).await?;
    load_balancer(&bed, &node, &ccm).await?;
    done(tenant);
    Ok(())
}

/// A DVPInstanceClass → the module's template → a MachineDeployment scaled 1 → 3 through the
/// real Cluster API manager and capdvp.
async fn node_group(bed: &Bed) -> anyhow::Result<()> {
    println!("\n==> a node group: DVPInstanceClass `worker` (2 cores, 2Gi, a root disk from the image and one more disk)");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "DVPInstanceClass"),
        "dvpinstanceclasses",
    );
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "DVPInstanceClass",
        "metadata": {"name": "worker"},
        "spec": {"virtualMachine": {"cpu": {"cores": 2, "coreFraction": "100%"}, "memory": {"size": "2Gi"},
                                    "virtualMachineClassName": CLASS},
                 "rootDisk": {"size": "10Gi", "storageClass": "linstor-thin-r1", "image": {"kind": "VirtualImage", "name": IMAGE}},
                 "additionalDisks": [{"size": "1Gi", "storageClass": "linstor-thin-r1"}]}
    }))?;
    let stored = Api::<DynamicObject>::all_with(bed.mgmt.clone(), &resource)
        .create(&PostParams::default(), &class)
        .await
        .context("the DVPInstanceClass")?;
    let spec = &stored.data["spec"];
    let (name, template) = dvp_node_group_template("workers", spec)?;
    let checksum = template["metadata"]["annotations"]["checksum/instance-class"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!(
        "    the module's DeckhouseMachineTemplate {name} (checksum/instance-class {}…):",
        &checksum[..16]
    );
    println!(
        "{}",
        super::indent(&serde_yaml::to_string(&template["spec"])?)
    );

    let capdvp = bed.start_capdvp(&[]);
    bed.create_cluster(CLASS, 0).await?;
    bed.apply_machine_template(template).await?;
    let log = || bed.logs(&capdvp);
    for replicas in [1, 3] {
        println!("==> MachineDeployment workers → {replicas} (Cluster API manager + capdvp)");
        let t0 = Instant::now();
        if replicas == 1 {
            bed.machine_deployment("workers", &name, replicas).await?;
        } else {
            bed.scale("workers", replicas).await?;
        }
        let vms = wait_for("the VMs in the parent", MACHINES_WAIT, || async {
            let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace())
                .list(&Default::default())
                .await?
                .items;
            // Judged on the list it shows: a second list could see a VM later than this one.
            let running = vms.iter().all(|vm| vm.phase() == Some(VmPhase::Running));
            Ok((vms.len() == replicas as usize && running).then_some(vms))
        })
        .await
        .with_context(log)?;
        println!(
            "    {replicas} VM(s) running in the parent after {:.1}s:",
            t0.elapsed().as_secs_f64()
        );
        println!(
            "    {:<40} {:<6} {:<7} {:<8} PHASE",
            "NAME", "CORES", "MEMORY", "CLASS"
        );
        for vm in vms {
            println!(
                "    {:<40} {:<6} {:<7} {:<8} {}",
                vm.metadata.name.as_deref().unwrap_or(""),
                vm.spec.cpu.cores,
                vm.spec.memory.size,
                vm.spec.virtual_machine_class_name,
                vm.phase().map(|p| format!("{p:?}")).unwrap_or_default()
            );
        }
    }
    println!(
        "    disks in the parent: {} (a root disk and the additional one per VM)",
        bed.parent_counts().await?.disks
    );
    Ok(())
}

/// The first VM's tenant Node (named by the VM's hostname label, as capdvp sets it), registered
/// uninitialised and initialised by the CCM under the shipped tenant and parent RBAC.
async fn node(bed: &Bed) -> anyhow::Result<(String, CcmProcess)> {
    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace())
        .list(&Default::default())
        .await?
        .items;
    let node = vms
        .iter()
        .filter_map(|vm| vm.label(HOSTNAME).map(str::to_owned))
        .min()
        .context("no VM carries a hostname label")?;
    println!();
    let vars = bed
        .env
        .bound_account_env("stratus-dvp-cloud-controller-manager", parent_role_rules()?)
        .await?;
    let args = [
        "--cloud-provider=dvp".to_string(),
        "--node-monitor-period=1s".to_string(),
    ];
    let ccm = story::ccm_initialises(
        &bed.env.tenant,
        &bed.mgmt,
        &node,
        &args,
        vars,
        " (in the parent under deploy/dvp/parent-rbac.yaml)",
    )
    .await?;
    Ok((node, ccm))
}

/// The DVP driver's controller pod (in the parent under `deploy/dvp/csi-parent-rbac.yaml`); a
/// claim with no class bound and attached.
async fn volume(bed: &Bed, tools: &Tools, node: &str) -> anyhow::Result<()> {
    let vars = bed
        .env
        .bound_account_env(
            "stratus-dvp-csi-driver",
            rules_in("deploy/dvp/csi-parent-rbac.yaml", "Role")?,
        )
        .await?;
    let pod = ControllerPod::start(
        &bed.env.tenant,
        tools,
        &DVP_CHART,
        "dvp-csi-driver",
        &["--cluster-uuid=uuid-1", "--provide-node-service=false"],
        &vars,
        bed.env.tenant.dir().join("dvp-csi"),
    )
    .await?;
    // What the node plugin's registration makes the kubelet write.
    csi_flow::csi_node(&bed.mgmt, node, DRIVER, node, Vec::new()).await?;

    let (claims, pv, disk, secs) = pod.claim_bound(&bed.mgmt, node, 1, DRIVER, "").await?;
    let stored = Api::<VirtualDisk>::namespaced(bed.parent.clone(), bed.env.namespace())
        .get(&disk)
        .await?;
    let pvc = stored.spec.persistent_volume_claim.unwrap_or_default();
    println!(
        "    Bound in {secs:.2}s to {pv}: VirtualDisk {disk} in the parent, size {} (bytes), parent class {}",
        pvc.size.unwrap_or_default(),
        pvc.storage_class_name.unwrap_or_default()
    );
    let (_, secs) = pod.attached(&claims, &pv, node).await?;
    let attachments = Api::<VirtualMachineBlockDeviceAttachment>::namespaced(
        bed.parent.clone(),
        bed.env.namespace(),
    )
    .list(&Default::default())
    .await?
    .items;
    let vmbda = attachments.first().context("no VMBDA in the parent")?;
    println!(
        "    attached in {secs:.2}s: VirtualMachineBlockDeviceAttachment {} hot-plugs {disk} into {}",
        vmbda.metadata.name.as_deref().unwrap_or(""),
        vmbda.spec.virtual_machine_name
    );
    Ok(())
}

/// A LoadBalancer Service given a LoadBalancer Service in the parent selecting the node's VM.
async fn load_balancer(bed: &Bed, node: &str, ccm: &CcmProcess) -> anyhow::Result<()> {
    let (_svc, ip, secs) = story::service_ingress(&bed.mgmt, node, ccm).await?;
    let parent = Api::<Service>::namespaced(bed.parent.clone(), bed.env.namespace())
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
        .context("no LoadBalancer Service in the parent")?;
    println!(
        "    ingress after {secs:.2}s: {ip}, from parent Service {}/{} selecting {:?}",
        bed.env.namespace(),
        parent.metadata.name.as_deref().unwrap_or(""),
        parent.spec.and_then(|s| s.selector).unwrap_or_default()
    );
    Ok(())
}
