//! capdvp under the real Cluster API manager (v1.14.2, built from its Go module): a
//! MachineDeployment of DeckhouseMachines scaled 0 → 10 → 3 → 0. Cluster API itself makes the
//! MachineSet, Machines and DeckhouseMachines; capdvp makes the VMs, disks and cloud-init Secrets
//! in the parent (as the shipped parent Role), reports providerID, addresses and
//! `status.initialization.provisioned`, and Cluster API copies them onto its Machines. At the
//! end the parent holds no VM, disk, Secret or attachment.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use common::{machines, Bed, Counts, CLUSTER, NS};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use stratus_capdvp::names;
use stratus_dvp_api::{VirtualMachine, VirtualMachineBlockDeviceAttachment, VmPhase};

const WAIT: Duration = Duration::from_secs(90);

async fn wait_counts(
    bed: &Bed,
    what: &str,
    want: impl Fn(&Counts) -> bool,
    log: &dyn Fn() -> String,
) -> Counts {
    let want = &want;
    let r = common::wait(what, WAIT, || {
        let fut = bed.parent_counts();
        async move {
            let c = fut.await?;
            Ok(want(&c).then_some(c))
        }
    })
    .await;
    match r {
        Ok(c) => c,
        Err(e) => panic!(
            "{e:#}; parent holds {:?}\n--- log ---\n{}",
            bed.parent_counts().await.ok(),
            log()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capi_scales_a_machine_deployment_0_10_3_0_and_leaves_nothing_behind() {
    let bed = Bed::start(true, common::capdvp_binary())
        .await
        .expect("test bed");
    let capdvp = bed.start_capdvp(&[]);
    let capi = bed.capi.as_ref().unwrap();
    let log = || {
        format!(
            "{}\n--- cluster-api ---\n{}",
            capdvp.log(),
            capi.log_tail(30)
        )
    };
    bed.create_cluster(common::CLASS, 0).await.unwrap();

    // The DeckhouseCluster reports provisioned; Cluster API's Cluster follows.
    let clusters = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Cluster"),
        "clusters",
    );
    let cluster_api = Api::<DynamicObject>::namespaced_with(bed.mgmt.clone(), NS, &clusters);
    common::wait("the Cluster's infrastructure provisioned", WAIT, || async {
        let c = cluster_api.get(CLUSTER).await?;
        Ok((c.data["status"]["initialization"]["infrastructureProvisioned"] == true).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));

    // 0 → 10: ten VMs run; each Machine is Ready within a second of its VM running.
    let started = Instant::now();
    bed.scale("workers", 10).await.unwrap();
    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace());
    let mut running_at: BTreeMap<String, Instant> = BTreeMap::new();
    let mut ready_at: BTreeMap<String, Instant> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while ready_at.len() < 10 {
        assert!(
            Instant::now() < deadline,
            "not 10 ready machines in time: {ready_at:?}\n{}",
            log()
        );
        for vm in vms.list(&ListParams::default()).await.unwrap() {
            if vm.phase() == Some(VmPhase::Running) {
                running_at
                    .entry(vm.name().to_string())
                    .or_insert_with(Instant::now);
            }
        }
        for dm in bed.deckhouse_machines().await.unwrap() {
            if dm.status.as_ref().is_some_and(|s| s.ready) {
                ready_at
                    .entry(dm.name().to_string())
                    .or_insert_with(Instant::now);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let scale_up = started.elapsed();
    let lag = ready_at
        .iter()
        .map(|(name, at)| {
            at.saturating_duration_since(running_at.get(name).copied().unwrap_or(*at))
        })
        .max()
        .unwrap();
    eprintln!(
        "0 -> 10: all ready after {:.1} s; max machine-ready lag behind its VM running: {:.2} s",
        scale_up.as_secs_f64(),
        lag.as_secs_f64()
    );
    // Event-driven, not polled: capdvp's requeue is far longer than this bound, which leaves
    // room for a loaded 2-core machine running other suites beside this one.
    assert!(
        lag < Duration::from_secs(5),
        "a machine was ready {lag:?} after its VM ran"
    );
    let counts = wait_counts(
        &bed,
        "10 VMs, 20 disks, 10 Secrets",
        |c| c.vms == 10 && c.running == 10 && c.disks == 20 && c.secrets == 10,
        &log,
    )
    .await;
    assert_eq!(counts.attachments, 0);

    // The contract: Cluster API copied providerID and provisioning onto its Machines.
    let machine_api = Api::<DynamicObject>::namespaced_with(bed.mgmt.clone(), NS, &machines());
    common::wait(
        "10 Machines with providerID and infrastructure provisioned",
        WAIT,
        || async {
            let list = machine_api.list(&ListParams::default()).await?.items;
            let done = list
                .iter()
                .filter(|m| {
                    m.data["spec"]["providerID"]
                        .as_str()
                        .is_some_and(|p| p.starts_with("dvp://"))
                        && m.data["status"]["initialization"]["infrastructureProvisioned"] == true
                })
                .count();
            Ok((done == 10 && list.len() == 10).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));
    for dm in bed.deckhouse_machines().await.unwrap() {
        let vm = vms.get(dm.name()).await.unwrap();
        assert_eq!(
            dm.spec.provider_id.as_deref(),
            Some(names::provider_id(vm.name()).as_str())
        );
        let status = dm.status.clone().unwrap();
        let ip = vm.ip_address().unwrap().to_string();
        assert!(
            status
                .addresses
                .iter()
                .any(|a| a.type_ == "InternalIP" && a.address == ip),
            "{status:?}"
        );
        assert_eq!(
            status.initialization.as_ref().unwrap().provisioned,
            Some(true)
        );
        assert_eq!(vm.label(stratus_dvp_api::labels::HOSTNAME), Some(dm.name()));
        assert_eq!(
            vm.label(stratus_dvp_api::labels::CLUSTER_UUID),
            Some("uuid-1")
        );
        assert_eq!(vm.spec.virtual_machine_class_name, common::CLASS);
        let owner = dm.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owner.iter().any(|o| o.kind == "Machine"),
            "Cluster API owns it: {owner:?}"
        );
    }

    // 10 → 3: seven VMs with their disks and Secrets go.
    bed.scale("workers", 3).await.unwrap();
    wait_counts(
        &bed,
        "3 VMs, 6 disks, 3 Secrets",
        |c| c.vms == 3 && c.disks == 6 && c.secrets == 3,
        &log,
    )
    .await;

    // A hot-plugged disk (as the CSI driver attaches one) is detached before its VM goes.
    let survivor = vms.list(&ListParams::default()).await.unwrap().items[0]
        .name()
        .to_string();
    let mut vmbda = VirtualMachineBlockDeviceAttachment::new(
        "vmbda-pvc-1",
        bed.env.namespace(),
        &survivor,
        "pvc-1",
    );
    vmbda.metadata.labels = Some(BTreeMap::from([(
        names::VMBDA_VM_LABEL.to_string(),
        survivor.clone(),
    )]));
    Api::<VirtualMachineBlockDeviceAttachment>::namespaced(bed.parent.clone(), bed.env.namespace())
        .create(&PostParams::default(), &vmbda)
        .await
        .unwrap();

    // 3 → 0: nothing left in the parent, no DeckhouseMachine, no Machine.
    bed.scale("workers", 0).await.unwrap();
    wait_counts(
        &bed,
        "an empty parent namespace",
        |c| *c == Counts::default(),
        &log,
    )
    .await;
    common::wait("no DeckhouseMachine or Machine left", WAIT, || async {
        let dms = bed.deckhouse_machines().await?.len();
        let ms = machine_api.list(&ListParams::default()).await?.items.len();
        Ok((dms == 0 && ms == 0).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));
}
