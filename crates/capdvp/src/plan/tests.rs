//! Unit tests of the pure plans: waiting order, prerequisites named, the rendered VM, disks and
//! Secret, phase handling and the deletion order.

use super::*;
use crate::api::infra::{AdditionalDisk, DiskImageRef, MachineCpu};
use k8s_openapi::jiff::Timestamp;
use stratus_dvp_api::VirtualMachineStatus;

fn spec() -> DeckhouseMachineSpec {
    DeckhouseMachineSpec {
        vm_class_name: "generic".into(),
        cpu: MachineCpu {
            cores: 2,
            cpu_fraction: "50%".into(),
        },
        memory: "4Gi".into(),
        root_disk_size: "20Gi".into(),
        root_disk_storage_class: "fast".into(),
        additional_disks: vec![AdditionalDisk {
            size: "5Gi".into(),
            storage_class: String::new(),
        }],
        boot_disk_image_ref: DiskImageRef {
            kind: "ClusterVirtualImage".into(),
            name: "ubuntu".into(),
        },
        ..DeckhouseMachineSpec::default()
    }
    .with_defaults()
}

fn render(spec: &DeckhouseMachineSpec) -> Render<'_> {
    Render {
        namespace: "capi",
        machine: "w-1",
        spec,
        parent_namespace: "tenant",
        cluster_uuid: "uuid",
        control_plane: false,
    }
}

fn now() -> Time {
    Time(Timestamp::UNIX_EPOCH)
}

#[test]
fn waits_for_owner_then_cluster_then_bootstrap() {
    let mut capi = CapiView::default();
    assert_eq!(
        waiting_for(&capi).unwrap().reason,
        reasons::WAITING_FOR_OWNER
    );
    capi.owned = true;
    capi.cluster = "c".into();
    let why = waiting_for(&capi).unwrap();
    assert_eq!(why.reason, reasons::WAITING_FOR_CLUSTER);
    assert!(why.message.contains("\"c\""), "{}", why.message);
    capi.cluster_provisioned = true;
    assert_eq!(
        waiting_for(&capi).unwrap().reason,
        reasons::WAITING_FOR_BOOTSTRAP
    );
    capi.data_secret = Some("b".into());
    assert_eq!(waiting_for(&capi), None);
}

#[test]
fn a_missing_class_or_image_is_named() {
    let s = spec();
    let why = missing_prerequisite(
        &s,
        Prerequisites {
            class: Some(false),
            image: Some(true),
        },
    )
    .unwrap();
    assert_eq!(why.reason, reasons::CLASS_NOT_FOUND);
    assert!(why.message.contains("\"generic\""), "{}", why.message);
    let why = missing_prerequisite(
        &s,
        Prerequisites {
            class: Some(true),
            image: Some(false),
        },
    )
    .unwrap();
    assert!(
        why.message.contains("ClusterVirtualImage \"ubuntu\""),
        "{}",
        why.message
    );
    assert_eq!(
        missing_prerequisite(
            &s,
            Prerequisites {
                class: None,
                image: None
            }
        ),
        None
    );
}

#[test]
fn renders_deckhouse_shaped_objects() {
    let s = spec();
    let r = render(&s);
    let vm = r.vm();
    assert_eq!(vm.name(), "w-1");
    assert_eq!(vm.spec.virtual_machine_class_name, "generic");
    assert_eq!(vm.spec.cpu.cores, 2);
    assert_eq!(
        vm.spec.run_policy.as_deref(),
        Some("AlwaysOnUnlessStoppedManually")
    );
    assert_eq!(vm.spec.live_migration_policy.as_deref(), Some("PreferSafe"));
    assert_eq!(vm.spec.bootloader.as_deref(), Some("EFI"));
    let devices: Vec<_> = vm
        .spec
        .block_device_refs
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(devices, ["w-1-boot", "w-1-additional-disk-0"]);
    let p = vm.spec.provisioning.as_ref().unwrap();
    assert_eq!(p.user_data_ref.as_ref().unwrap().name, "cloud-init-w-1");
    assert_eq!(vm.label(stratus_dvp_api::labels::HOSTNAME), Some("w-1"));
    let owner = vm_owner(&vm);
    let disks = r.disks(&owner);
    assert_eq!(disks.len(), 2);
    let boot = disks[0]
        .spec
        .data_source
        .as_ref()
        .unwrap()
        .object_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (boot.kind.as_str(), boot.name.as_str()),
        ("ClusterVirtualImage", "ubuntu")
    );
    assert_eq!(
        disks[1]
            .spec
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .storage_class_name,
        None
    );
    let secret = r.cloud_init(b"#cloud-config", &owner);
    assert_eq!(secret.type_.as_deref(), Some(names::CLOUD_INIT_SECRET_TYPE));
    assert_eq!(secret.data.unwrap()["userData"].0, b"#cloud-config");
    let cp = Render {
        control_plane: true,
        ..render(&s)
    };
    assert_eq!(
        cp.vm().spec.live_migration_policy.as_deref(),
        Some("PreferForced")
    );
}

fn vm(phase: &str, ip: &str) -> VirtualMachine {
    let mut vm = VirtualMachine::new("w-1", "tenant", VirtualMachineSpec::default());
    vm.status = Some(VirtualMachineStatus {
        phase: phase.into(),
        ip_address: ip.into(),
        ..VirtualMachineStatus::default()
    });
    vm
}

#[test]
fn phases_as_deckhouse_handles_them() {
    let running = vm_view(&vm("Running", "10.0.0.1"), false);
    assert!(running.ready && running.provisioned && running.condition_true);
    let kinds: Vec<_> = running.addresses.iter().map(|a| a.type_.as_str()).collect();
    assert_eq!(
        kinds,
        ["Hostname", "InternalDNS", "InternalIP", "ExternalIP"]
    );
    let stopped = vm_view(&vm("Stopped", "10.0.0.1"), true);
    assert_eq!(
        (stopped.ready, stopped.reason),
        (false, reasons::VM_STOPPED)
    );
    assert!(vm_view(&vm("Degraded", ""), false).failure.is_some());
    assert!(vm_view(&vm("Degraded", ""), true).failure.is_none());
    assert_eq!(
        vm_view(&vm("Starting", ""), false).reason,
        reasons::VM_NOT_READY
    );

    // Provisioning once reported stays, even when the VM stops later.
    let first = status_for_vm(&DeckhouseMachineStatus::default(), &running, now());
    assert_eq!(
        first.initialization.as_ref().unwrap().provisioned,
        Some(true)
    );
    let later = status_for_vm(&first, &stopped, now());
    assert!(!later.ready);
    assert_eq!(
        later.initialization.as_ref().unwrap().provisioned,
        Some(true)
    );
    assert_eq!(later.conditions.len(), 1);
    assert_eq!(later.conditions[0].status, "False");
}

#[test]
fn deletion_detaches_then_deletes_vm_then_disks_and_orphans_on_deadline() {
    let mut left = Leftovers {
        attachments: vec!["a".into()],
        vm: Some("w-1".into()),
        disks: vec!["w-1-boot".into()],
    };
    assert_eq!(
        delete_step(&left, false),
        DeleteStep::Detach(vec!["a".into()])
    );
    left.attachments.clear();
    assert_eq!(delete_step(&left, false), DeleteStep::DeleteVm);
    assert!(matches!(
        delete_step(&left, true),
        DeleteStep::Orphan { vm: Some(_), .. }
    ));
    left.vm = None;
    assert_eq!(
        delete_step(&left, false),
        DeleteStep::DeleteDisks(vec!["w-1-boot".into()])
    );
    left.disks.clear();
    assert_eq!(delete_step(&left, true), DeleteStep::Done);
    let notes = orphan_annotations(Some("w-1"), &["w-1-boot".into()]);
    assert_eq!(notes[names::ORPHANED_VM_ANNOTATION], "w-1");
    assert_eq!(notes.len(), 2);
}
