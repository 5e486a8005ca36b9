//! A deletion the parent never finishes: the machine's VM is held by a finalizer nobody removes,
//! so it outlives capdvp's `--delete-timeout`. capdvp names what is left (the VM and its two
//! disks, which go only after the VM) in a Warning Event and its `capdvp_orphaned_objects_total`
//! metric and releases the DeckhouseMachine, so Cluster API's scale-down is not stuck forever;
//! what the parent keeps is exactly what was reported.

mod common;

use std::time::Duration;

use common::{Bed, NS};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use stratus_dvp_api::VirtualMachine;
use stratus_testenv::core::https::{get, Trust};
use stratus_testenv::Identity;

const WAIT: Duration = Duration::from_secs(90);
const HOLD: &str = "stratus.test/hold";

fn orphaned(metrics: &str, kind: &str) -> f64 {
    let label = format!("kind=\"{kind}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("capdvp_orphaned_objects_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_past_its_deadline_is_reported_and_releases_the_machine() {
    let bed = Bed::start(true, common::capdvp_binary())
        .await
        .expect("test bed");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secure = format!("--secure-port={port}");
    let capdvp = bed.start_capdvp(&[&secure, "--bind-address=127.0.0.1", "--delete-timeout=5s"]);
    let log = || capdvp.log();
    bed.create_cluster(common::CLASS, 1).await.unwrap();
    common::wait("one running VM", WAIT, || async {
        Ok((bed.parent_counts().await?.running == 1).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));

    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace());
    let vm = vms.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    vms.patch(
        &vm,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": [HOLD]}})),
    )
    .await
    .unwrap();

    bed.scale("workers", 0).await.unwrap();
    common::wait("the DeckhouseMachine released", WAIT, || async {
        Ok(bed.deckhouse_machines().await?.is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));

    // The VM is still there, being deleted: capdvp asked and let go when the deadline passed.
    let held = vms.get(&vm).await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "capdvp never asked to delete {vm}"
    );
    let events = Api::<Event>::namespaced(bed.mgmt.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let event = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("OrphanedResources"))
        .unwrap_or_else(|| panic!("no OrphanedResources Event in {events:#?}\n{}", log()));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let message = event.message.clone().unwrap_or_default();
    for part in [
        format!("VirtualMachine {vm}"),
        format!("VirtualDisk {vm}-boot"),
        "within 5 s".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
    let token = bed.env.tenant.token(Identity::Admin).to_string();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let metrics = get(addr, "/metrics", Some(&token), &Trust::Any)
        .await
        .unwrap()
        .body;
    assert_eq!(orphaned(&metrics, "VirtualMachine"), 1.0, "{metrics}");
    assert_eq!(orphaned(&metrics, "VirtualDisk"), 2.0, "{metrics}");

    // Once the parent lets the VM go, what is left is what was reported: its two disks and
    // its cloud-init Secret (no garbage collector runs in the test parent).
    vms.patch(
        &vm,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let reported = common::Counts {
        disks: 2,
        secrets: 1,
        ..common::Counts::default()
    };
    if let Err(e) = common::wait("only the reported disks left", WAIT, || async {
        Ok((bed.parent_counts().await? == reported).then_some(()))
    })
    .await
    {
        panic!("{e:#}; {:?}\n{}", bed.parent_counts().await.ok(), log());
    }
}
