//! The DVP environment: two real clusters, the generated virtualization CRDs in the parent, the
//! tenant's namespace-bound identity and the platform simulator (phases, ingress, disks,
//! attachments, faults). The kinds Stratus writes are checked against the generated schemas.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, ValidationDirective,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use stratus_dvp_api::{
    BlockDeviceRef, Cpu, Memory, Provisioning, VirtualDisk, VirtualDiskPvc, VirtualDiskSpec,
    VirtualMachine, VirtualMachineBlockDeviceAttachment, VirtualMachineSpec, VmPhase,
};
use stratus_testenv::dvp::deny::DENIED_MESSAGE;
use stratus_testenv::DvpEnv;

const WAIT: Duration = Duration::from_secs(20);

async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A VM spec with every field Stratus (and capdvp-style fixtures) write.
fn full_vm_spec() -> VirtualMachineSpec {
    VirtualMachineSpec {
        run_policy: Some("AlwaysOn".into()),
        virtual_machine_class_name: "generic".into(),
        cpu: Cpu {
            cores: 2,
            core_fraction: Some("50%".into()),
        },
        memory: Memory { size: "2Gi".into() },
        block_device_refs: vec![BlockDeviceRef {
            kind: "VirtualDisk".into(),
            name: "root".into(),
        }],
        live_migration_policy: Some("PreferSafe".into()),
        os_type: Some("Generic".into()),
        bootloader: Some("EFI".into()),
        enable_paravirtualization: Some(true),
        provisioning: Some(Provisioning {
            type_: "UserData".into(),
            user_data: Some("#cloud-config\n".into()),
            ..Provisioning::default()
        }),
    }
}

fn strict_dry_run() -> PatchParams {
    PatchParams {
        dry_run: true,
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::apply("stratus-schema-check").force()
    }
}

fn vm_phase(vm: &VirtualMachine) -> Option<VmPhase> {
    vm.phase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_kinds_match_the_schemas_and_the_platform_plays_its_part() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let ns = env.namespace();
    let tenant = env.parent_tenant_client().await.unwrap();
    let vms = Api::<VirtualMachine>::namespaced(tenant.clone(), ns);
    let disks = Api::<VirtualDisk>::namespaced(tenant.clone(), ns);
    let vmbdas = Api::<VirtualMachineBlockDeviceAttachment>::namespaced(tenant.clone(), ns);

    // Every field we write is accepted by the platform's own (generated) schemas, strictly.
    let vm = VirtualMachine::new("node-a", ns, full_vm_spec());
    vms.patch("node-a", &strict_dry_run(), &Patch::Apply(&vm))
        .await
        .expect("the generated VirtualMachine schema accepts our fields");
    let disk = VirtualDisk::new(
        "pvc-1",
        ns,
        VirtualDiskSpec {
            persistent_volume_claim: Some(VirtualDiskPvc {
                size: Some("1Gi".into()),
                storage_class_name: Some("fast".into()),
            }),
            ..VirtualDiskSpec::default()
        },
    );
    disks
        .patch("pvc-1", &strict_dry_run(), &Patch::Apply(&disk))
        .await
        .expect("VirtualDisk schema");
    let vmbda =
        VirtualMachineBlockDeviceAttachment::new("vmbda-pvc-1-node-a", ns, "node-a", "pvc-1");
    vmbdas
        .patch(
            "vmbda-pvc-1-node-a",
            &strict_dry_run(),
            &Patch::Apply(&vmbda),
        )
        .await
        .expect("VMBDA schema");
    // ... and the check can fail: a field the platform does not know is refused.
    let mut bogus = serde_json::to_value(&vm).unwrap();
    bogus["spec"]["cpuCount"] = json!(2);
    let refused = vms
        .patch("node-a", &strict_dry_run(), &Patch::Apply(&bogus))
        .await
        .expect_err("an unknown field must be refused");
    assert!(refused.to_string().contains("cpuCount"), "{refused}");
    // The ServiceWithHealthchecks CRD (written from the API reference) is structural.
    let swhc_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "network.deckhouse.io",
            "v1alpha1",
            "ServiceWithHealthchecks",
        ),
        "servicewithhealthchecks",
    );
    let swhcs = Api::<DynamicObject>::namespaced_with(tenant.clone(), ns, &swhc_resource);
    let swhc = json!({
        "apiVersion": "network.deckhouse.io/v1alpha1",
        "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "a1", "namespace": ns},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"dvp.deckhouse.io/a1": "loadbalancer"},
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 30080}],
            "externalTrafficPolicy": "Local",
            "healthcheck": {"probes": [{"mode": "HTTP", "http": {"targetPort": 10256, "path": "/healthz"}}]}
        }
    });
    swhcs
        .patch("a1", &strict_dry_run(), &Patch::Apply(&swhc))
        .await
        .expect("ServiceWithHealthchecks schema");

    // The environment Deckhouse hands the DVP components carries exactly this kubeconfig.
    let vars: std::collections::BTreeMap<String, String> = env.env_vars().into_iter().collect();
    assert_eq!(vars["DVP_NAMESPACE"], ns);
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&vars["DVP_KUBERNETES_CONFIG_BASE64"])
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        env.parent_kubeconfig_yaml()
    );

    // The tenant's identity is bound to its namespace.
    let elsewhere = Api::<VirtualMachine>::namespaced(tenant.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect_err("the tenant may not read another namespace");
    assert!(elsewhere.to_string().contains("forbidden"), "{elsewhere}");

    // VM lifecycle: Pending → Starting → Running with an address and its disk attached.
    vms.create(&PostParams::default(), &vm)
        .await
        .expect("create VM");
    let running = wait_for("node-a Running with an IP", || async {
        let vm = vms.get("node-a").await.ok()?;
        (vm_phase(&vm) == Some(VmPhase::Running) && vm.ip_address().is_some()).then_some(vm)
    })
    .await;
    let status = running.status.clone().unwrap();
    assert_eq!(status.node_name, stratus_testenv::dvp::PLATFORM_NODE);
    assert_eq!(status.block_device_refs.len(), 1);
    assert!(status.block_device_refs[0].attached);
    let ip = status.ip_address.clone();

    // runPolicy off → Stopping → Stopped, the address kept.
    vms.patch(
        "node-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runPolicy": "AlwaysOff"}})),
    )
    .await
    .unwrap();
    wait_for("node-a Stopped", || async {
        let vm = vms.get("node-a").await.ok()?;
        (vm_phase(&vm) == Some(VmPhase::Stopped)).then_some(())
    })
    .await;
    assert_eq!(
        vms.get("node-a").await.unwrap().ip_address(),
        Some(ip.as_str())
    );

    // Disks become Ready with their size; attachments Attached.
    disks.create(&PostParams::default(), &disk).await.unwrap();
    vmbdas.create(&PostParams::default(), &vmbda).await.unwrap();
    wait_for("pvc-1 Ready", || async {
        let s = disks.get("pvc-1").await.ok()?.status?;
        (s.phase == "Ready" && s.capacity.as_deref() == Some("1Gi")).then_some(())
    })
    .await;
    wait_for("the VMBDA Attached", || async {
        let s = vmbdas.get("vmbda-pvc-1-node-a").await.ok()?.status?;
        (s.phase == "Attached").then_some(())
    })
    .await;

    // The attached disk is listed, hot-plugged, in the VM's status; deleting the VMBDA detaches
    // it first, then the object goes.
    wait_for("pvc-1 hot-plugged into node-a", || async {
        let refs = vms.get("node-a").await.ok()?.status?.block_device_refs;
        refs.iter()
            .any(|d| {
                d.name == "pvc-1"
                    && d.hotplugged
                    && d.virtual_machine_block_device_attachment_name.as_deref()
                        == Some("vmbda-pvc-1-node-a")
            })
            .then_some(())
    })
    .await;
    vmbdas
        .delete("vmbda-pvc-1-node-a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    wait_for("the VMBDA gone and pvc-1 detached", || async {
        let gone = vmbdas.get_opt("vmbda-pvc-1-node-a").await.ok()?.is_none();
        let refs = vms.get("node-a").await.ok()?.status?.block_device_refs;
        (gone && !refs.iter().any(|d| d.name == "pvc-1")).then_some(())
    })
    .await;

    // A LoadBalancer Service in the parent gets an ingress IP.
    let services = Api::<Service>::namespaced(tenant.clone(), ns);
    let svc = Service {
        metadata: kube::api::ObjectMeta {
            name: Some("a1".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    services.create(&PostParams::default(), &svc).await.unwrap();
    wait_for("an ingress IP on the parent Service", || async {
        let s = services.get("a1").await.ok()?;
        let ingress = s.status?.load_balancer?.ingress?;
        ingress.first()?.ip.clone()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_faults_stall_degrade_and_deny() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let ns = env.namespace();
    let tenant = env.parent_tenant_client().await.unwrap();
    let vms = Api::<VirtualMachine>::namespaced(tenant.clone(), ns);
    let phase_of = |name: &'static str| {
        let vms = vms.clone();
        async move { vms.get(name).await.ok().and_then(|vm| vm.phase()) }
    };

    // Stall: the VM stays Pending for many phase delays, then runs once released.
    env.sim().set_knobs(|k| k.stall_vms = true);
    vms.create(
        &PostParams::default(),
        &VirtualMachine::new("stalled", ns, full_vm_spec()),
    )
    .await
    .unwrap();
    wait_for("stalled Pending", || async {
        (phase_of("stalled").await == Some(VmPhase::Pending)).then_some(())
    })
    .await;
    let hold_until = tokio::time::Instant::now() + env.sim().knobs().phase_delay * 10;
    while tokio::time::Instant::now() < hold_until {
        assert_eq!(
            phase_of("stalled").await,
            Some(VmPhase::Pending),
            "stall holds"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.sim().set_knobs(|k| k.stall_vms = false);
    wait_for("stalled Running once released", || async {
        (phase_of("stalled").await == Some(VmPhase::Running)).then_some(())
    })
    .await;

    // Degraded: the named VM breaks while running.
    env.sim()
        .set_knobs(|k| _ = k.degraded_vms.insert("stalled".into()));
    wait_for("stalled Degraded", || async {
        (phase_of("stalled").await == Some(VmPhase::Degraded)).then_some(())
    })
    .await;

    // Deny: creates of VMs are refused by the platform until allowed again.
    env.deny(stratus_dvp_api::GROUP, "virtualmachines", &["CREATE"])
        .await
        .unwrap();
    let probe = VirtualMachine::new("probe", ns, full_vm_spec());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let refusal = wait_for("the platform to refuse VM creates", || async {
        vms.create(&dry, &probe).await.err().map(|e| e.to_string())
    })
    .await;
    assert!(refusal.contains(DENIED_MESSAGE), "{refusal}");
    env.allow(stratus_dvp_api::GROUP, "virtualmachines")
        .await
        .unwrap();
    wait_for("VM creates allowed again", || async {
        vms.create(&dry, &probe).await.ok().map(|_| ())
    })
    .await;
}
