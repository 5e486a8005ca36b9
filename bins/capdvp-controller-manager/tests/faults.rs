//! Faults under the real Cluster API manager: capdvp SIGKILLed while it creates six machines
//! (restarted: no duplicate VM, disk or Secret); a template naming a VM class the parent does not
//! have (the machine's condition names the class, nothing is made); the parent refusing VM
//! creation by admission (the condition names the class and the parent's message, nothing is
//! left half-made); the parent apiserver down for 60 s while the deployment grows (converges
//! after); then everything scaled away leaves an empty namespace.

mod common;

use std::time::Duration;

use common::{Bed, Counts};
use stratus_capdvp::api::DeckhouseMachine;
use stratus_capdvp::plan::reasons;
use stratus_testenv::dvp::deny::DENIED_MESSAGE;

const WAIT: Duration = Duration::from_secs(90);

/// After the parent's 60 s outage: the controllers' backoff (CAPI's and ours) may have grown
/// to a minute, and a loaded 2-core machine slows every retry; still a wait for the condition.
const AFTER_OUTAGE: Duration = Duration::from_secs(180);

async fn counts_become(bed: &Bed, what: &str, want: Counts, log: &dyn Fn() -> String) {
    counts_within(bed, what, want, WAIT, log).await
}

async fn counts_within(
    bed: &Bed,
    what: &str,
    want: Counts,
    limit: Duration,
    log: &dyn Fn() -> String,
) {
    if let Err(e) = common::wait(what, limit, || {
        let fut = bed.parent_counts();
        async move { Ok((fut.await? == want).then_some(())) }
    })
    .await
    {
        panic!(
            "{e:#}; parent holds {:?}\n--- log ---\n{}",
            bed.parent_counts().await.ok(),
            log()
        );
    }
}

fn pool_of(dm: &DeckhouseMachine) -> Option<&str> {
    dm.metadata.labels.as_ref()?.get("pool").map(String::as_str)
}

async fn condition_of_pool(bed: &Bed, pool: &str, log: &dyn Fn() -> String) -> (String, String) {
    common::wait(&format!("the {pool} machine's condition"), WAIT, || async {
        let dms = bed.deckhouse_machines().await?;
        Ok(dms
            .iter()
            .filter(|d| pool_of(d) == Some(pool))
            .filter_map(|d| d.status.as_ref())
            .flat_map(|s| s.conditions.iter())
            .find(|c| {
                c.type_ == "VirtualMachineReady"
                    && (c.reason == reasons::CLASS_NOT_FOUND || c.reason == reasons::VM_REFUSED)
            })
            .map(|c| (c.reason.clone(), c.message.clone())))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()))
}

fn full(machines: usize) -> Counts {
    Counts {
        vms: machines,
        running: machines,
        disks: 2 * machines,
        secrets: machines,
        attachments: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_refusals_and_a_parent_outage_leave_no_duplicate_and_no_leak() {
    let mut bed = Bed::start(true, common::capdvp_binary())
        .await
        .expect("test bed");
    // VMs take a while to start, so the kill lands mid-create.
    bed.env
        .sim()
        .set_knobs(|k| k.phase_delay = Duration::from_millis(300));
    let mut capdvp = bed.start_capdvp(&[]);
    bed.create_cluster(common::CLASS, 0).await.unwrap();

    // SIGKILL while six machines are being made.
    bed.scale("workers", 6).await.unwrap();
    common::wait("the first VM", WAIT, || async {
        Ok((bed.parent_counts().await?.vms > 0).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", capdvp.log()));
    capdvp.kill();
    let before = bed.parent_counts().await.unwrap();
    eprintln!("killed capdvp with {before:?} in the parent");
    let mut capdvp = bed.start_capdvp(&[]);
    let log = || capdvp.log();
    counts_become(&bed, "six machines, each once", full(6), &log).await;

    // A VM class the parent does not have: named, nothing made.
    bed.template("bad", "no-such-class").await.unwrap();
    bed.machine_deployment("bad", "bad", 1).await.unwrap();
    let (reason, message) = condition_of_pool(&bed, "bad", &log).await;
    assert_eq!(reason, reasons::CLASS_NOT_FOUND);
    assert!(message.contains("\"no-such-class\""), "{message}");
    assert_eq!(
        bed.parent_counts().await.unwrap(),
        full(6),
        "nothing made for it"
    );

    // The parent refuses the VM (admission): the class and the parent's message are named,
    // nothing half-made is left.
    bed.env
        .deny(stratus_dvp_api::GROUP, "virtualmachines", &["CREATE"])
        .await
        .unwrap();
    bed.machine_deployment("denied", "workers", 1)
        .await
        .unwrap();
    let (reason, message) = condition_of_pool(&bed, "denied", &log).await;
    assert_eq!(reason, reasons::VM_REFUSED);
    assert!(
        message.contains(common::CLASS) && message.contains(DENIED_MESSAGE),
        "{message}"
    );
    assert_eq!(
        bed.parent_counts().await.unwrap(),
        full(6),
        "nothing half-made"
    );
    bed.scale("bad", 0).await.unwrap();
    bed.scale("denied", 0).await.unwrap();
    bed.env
        .allow(stratus_dvp_api::GROUP, "virtualmachines")
        .await
        .unwrap();

    // The parent down for 60 s while the deployment grows: converges after.
    bed.env.parent.stop_apiserver();
    bed.scale("workers", 8).await.unwrap();
    // The outage itself (the scenario's 60 s, not a wait for a condition).
    tokio::time::sleep(Duration::from_secs(60)).await;
    bed.env.parent.start_apiserver().await.unwrap();
    counts_within(
        &bed,
        "eight machines after the outage",
        full(8),
        AFTER_OUTAGE,
        &log,
    )
    .await;

    bed.scale("workers", 0).await.unwrap();
    counts_become(&bed, "an empty parent namespace", Counts::default(), &log).await;
    if let Err(e) = common::wait("no DeckhouseMachine left", WAIT, || async {
        Ok(bed.deckhouse_machines().await?.is_empty().then_some(()))
    })
    .await
    {
        panic!(
            "{e:#}\ncapdvp exited: {:?}\n{}\n--- capdvp log ---\n{}",
            capdvp.try_exit(),
            bed.machines_report().await,
            capdvp.log()
        );
    }
}
