//! `make demo MODULE=dvp`: the DVP module on a tenant control plane with a parent virtualization
//! cluster (two kube-apiservers, the platform simulator playing the virtualization controllers).
//! The chart with `examples/cloud-provider-dvp.values.yaml`; the cloud-data-discoverer, under its
//! shipped parent RBAC, lists the parent's StorageClasses; the module controller turns the enabled
//! ones into the tenant's (the parent's default is the module's); then a node group: a
//! `DVPInstanceClass` as the apiserver stores it becomes the module's `DeckhouseMachineTemplate`,
//! and the real Cluster API manager with capdvp scales a MachineDeployment over it to VMs in the
//! parent.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};
use stratus_dvp_api::VirtualMachine;
use stratus_module::machine_classes::dvp_machine_template;
use stratus_scenarios::capdvp_bed::{Bed, CLASS, IMAGE, NS};
use stratus_scenarios::ccm::sibling_binary;
use stratus_scenarios::dvp_rbac::discoverer_parent_identity;
use stratus_scenarios::wait_for;
use tokio::time::Instant;

use super::{
    done, install_chart, print_classes, print_registration, run_discoverer, run_module_controller,
    wait_classes,
};

/// Cluster API and capdvp take a while to bring machines on a loaded laptop.
const MACHINES_WAIT: Duration = Duration::from_secs(120);

pub async fn run() -> anyhow::Result<()> {
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

    let controller = run_module_controller(tenant, &bed.mgmt).await?;
    let t0 = Instant::now();
    let made = wait_classes(&bed.mgmt, "cloud-provider-dvp", 2, &controller).await?;
    println!(
        "    StorageClasses in {:.2}s, one per enabled parent class (local-.* excluded by the settings); the parent's default is the module's:",
        t0.elapsed().as_secs_f64()
    );
    print_classes(&made)?;
    print_registration(&bed.mgmt, "dvp", "").await?;

    node_group(&bed).await?;
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
    let probe = dvp_machine_template("probe", "workers", spec)?;
    let checksum = probe["metadata"]["annotations"]["checksum/instance-class"]
        .as_str()
        .context("the checksum annotation")?
        .to_string();
    let name = format!("workers-{}", &checksum[..8]);
    let mut template = dvp_machine_template(&name, "workers", spec)?;
    template["metadata"]["namespace"] = json!(NS);
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
    let templates = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1alpha1",
            "DeckhouseMachineTemplate",
        ),
        "deckhousemachinetemplates",
    );
    Api::<DynamicObject>::namespaced_with(bed.mgmt.clone(), NS, &templates)
        .patch(
            &name,
            &PatchParams::apply("stratus-demo").force(),
            &Patch::Apply(&serde_json::from_value::<DynamicObject>(template)?),
        )
        .await?;
    let log = || {
        format!(
            "{}\n--- cluster-api ---\n{}",
            capdvp.log(),
            bed.capi
                .as_ref()
                .map(|c| c.log_tail(30))
                .unwrap_or_default()
        )
    };
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
            let running = bed.parent_counts().await?.running;
            Ok((vms.len() == replicas as usize && running == vms.len()).then_some(vms))
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
