//! The module's `DeckhouseMachineTemplate` driven by its real consumers: the real Cluster API
//! manager and capdvp take a MachineDeployment over the template the module renders from a
//! `DVPInstanceClass` to VMs in the parent with the class's CPU, memory, VM class and disks; a changed
//! instance class gives a template with another `checksum/instance-class`, and pointing the
//! deployment at it rolls every machine to VMs of the new class.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result};
use common::{Bed, CLASS, IMAGE, NS};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use stratus_dvp_api::VirtualMachine;
use stratus_module::machine_classes::dvp_node_group_template;

const WAIT: Duration = Duration::from_secs(120);

/// A `DVPInstanceClass` spec with `cores` CPU cores.
fn instance_class(cores: i64) -> Value {
    json!({"virtualMachine": {"cpu": {"cores": cores, "coreFraction": "100%"}, "memory": {"size": "2Gi"},
                              "virtualMachineClassName": CLASS},
           "rootDisk": {"size": "10Gi", "storageClass": "fast", "image": {"kind": "VirtualImage", "name": IMAGE}},
           "additionalDisks": [{"size": "1Gi", "storageClass": "fast"}]})
}

/// The module's template for `class`, named as node-manager names it (node group and the first
/// eight digits of the class checksum), in the bed's namespace; returns its name and checksum.
async fn apply_template(bed: &Bed, class: &Value) -> Result<(String, String)> {
    let (name, template) = dvp_node_group_template("workers", class)?;
    let checksum = template["metadata"]["annotations"]["checksum/instance-class"]
        .as_str()
        .context("the checksum annotation")?
        .to_string();
    bed.apply_machine_template(template).await?;
    Ok((name, checksum))
}

/// The cores of every VM in the parent, once there are exactly `count` and all run.
async fn vms_running(bed: &Bed, count: usize) -> Result<Option<Vec<i32>>> {
    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace())
        .list(&Default::default())
        .await?
        .items;
    let counts = bed.parent_counts().await?;
    Ok((vms.len() == count && counts.running == count)
        .then(|| vms.iter().map(|vm| vm.spec.cpu.cores).collect()))
}

/// The templates the DeckhouseMachines were cloned from (Cluster API's annotation).
async fn machine_templates(bed: &Bed) -> Result<BTreeSet<String>> {
    Ok(bed
        .deckhouse_machines()
        .await?
        .iter()
        .filter_map(|m| {
            m.metadata
                .annotations
                .as_ref()?
                .get("cluster.x-k8s.io/cloned-from-name")
                .cloned()
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_instance_class_rolls_the_machines_through_cluster_api() -> Result<()> {
    let bed = Bed::start(true, common::capdvp_binary()).await?;
    let capdvp = bed.start_capdvp(&[]);
    let log = || bed.logs(&capdvp);
    bed.create_cluster(CLASS, 0).await?;

    let (first, first_sum) = apply_template(&bed, &instance_class(2)).await?;
    bed.machine_deployment("workers", &first, 2).await?;
    let cores = common::wait("two VMs of the first class", WAIT, || vms_running(&bed, 2))
        .await
        .with_context(log)?;
    assert_eq!(cores, [2, 2]);
    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace())
        .list(&Default::default())
        .await?
        .items;
    for vm in &vms {
        assert_eq!(vm.spec.memory.size, "2Gi");
        assert_eq!(vm.spec.virtual_machine_class_name, CLASS);
    }
    // The root disk and the additional disk of the class, per VM.
    assert_eq!(bed.parent_counts().await?.disks, 4);

    // The class changes: a new template with another checksum; the deployment follows it. No
    // workload cluster runs here, so no Machine ever becomes available: the rollout may replace
    // both at once (a surge would wait for a new node forever).
    let (second, second_sum) = apply_template(&bed, &instance_class(4)).await?;
    assert_ne!(first, second);
    assert_ne!(first_sum, second_sum);
    bed.machine_deployment("workers", &second, 2).await?;
    Api::<DynamicObject>::namespaced_with(bed.mgmt.clone(), NS, &common::machine_deployments())
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 2}}}}})),
        )
        .await?;
    common::wait("every machine rolled to the new class", WAIT, || async {
        let cores = vms_running(&bed, 2).await?;
        let templates = machine_templates(&bed).await?;
        Ok(
            (cores.as_deref() == Some(&[4, 4][..])
                && templates == BTreeSet::from([second.clone()]))
            .then_some(()),
        )
    })
    .await
    .with_context(log)?;
    Ok(())
}
