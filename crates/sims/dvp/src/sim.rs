//! The DVP platform simulator: kube-rs controllers on the parent cluster that play the
//! virtualization platform's part for one tenant namespace. VirtualMachines go Pending →
//! Starting → Running (an IP address, the node, the spec's block devices attached) and Stopping →
//! Stopped when `runPolicy` says off; VirtualDisks become Ready with their size as capacity;
//! VMBDAs become Attached; LoadBalancer Services get an ingress IP; a ServiceWithHealthchecks
//! gets its Service (owned by it, the same name and spec) and reports that Service's ingress.
//! Delays and faults are [`Knobs`], changed while it runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::json;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment, VmPhase};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::plan::{next_vm_step, Step, STALL_POLL};

/// The platform node every simulated VM runs on.
pub const PLATFORM_NODE: &str = "virtlab-1";
/// The simulator's finalizer on VMBDAs: a deleted attachment goes only once its disk left the VM.
pub const VMBDA_FINALIZER: &str = "virtualization.deckhouse.io/stratus-sim-detach";
/// How long after a failed write the simulator tries again.
const RETRY: Duration = Duration::from_millis(500);

/// Delays and faults of the simulated platform.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Time between VM phase changes.
    pub phase_delay: Duration,
    /// First two octets of the VM addresses handed out from now on (`10.66` by default;
    /// `127.66` puts VMs on loopback addresses a test can serve, e.g. kube-proxy health checks).
    pub vm_ip_prefix: String,
    /// Fixed addresses of VMs (by name) when they run, in place of one from `vm_ip_prefix` (an
    /// end-to-end test gives a VM the address of its real node).
    pub vm_addresses: BTreeMap<String, String>,
    /// VMs stay `Pending` (the platform cannot schedule them).
    pub stall_vms: bool,
    /// VMs (by name) that go `Degraded` and stay there.
    pub degraded_vms: BTreeSet<String>,
    /// Time from a LoadBalancer Service's creation to its ingress IP.
    pub lb_delay: Duration,
    /// LoadBalancer Services get no ingress IP.
    pub stall_lbs: bool,
    /// Time from a VirtualDisk's creation to `Ready`, and from a VMBDA's to `Attached`.
    pub disk_delay: Duration,
    /// VMBDAs stay `InProgress`.
    pub stall_attachments: bool,
    /// VMBDAs (by name) that end `Failed`.
    pub failed_attachments: BTreeSet<String>,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            phase_delay: Duration::from_millis(50),
            vm_ip_prefix: "10.66".into(),
            vm_addresses: BTreeMap::new(),
            stall_vms: false,
            degraded_vms: BTreeSet::new(),
            lb_delay: Duration::ZERO,
            stall_lbs: false,
            disk_delay: Duration::from_millis(50),
            stall_attachments: false,
            failed_attachments: BTreeSet::new(),
        }
    }
}

/// A running simulator; dropping it stops its controllers.
pub struct PlatformSim {
    knobs: Arc<Mutex<Knobs>>,
    /// One per controller: a message makes it look at every object again (knobs changed).
    nudges: Vec<UnboundedSender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
#[error("platform simulator: {0}")]
struct SimError(#[from] kube::Error);

struct Ctx {
    client: kube::Client,
    namespace: String,
    knobs: Arc<Mutex<Knobs>>,
    state: Mutex<SimState>,
}

#[derive(Default)]
struct SimState {
    /// When the simulator last changed (or first saw) an object, by `kind/name`.
    changed: HashMap<String, Instant>,
    vm_ips: HashMap<String, String>,
    lb_ips: HashMap<String, String>,
    /// Hot-plugged disks by VM: VMBDA name → VirtualDisk name.
    hotplugged: HashMap<String, BTreeMap<String, String>>,
}

impl Ctx {
    /// `status.blockDeviceRefs` of `vm`: its spec's devices, then the hot-plugged disks.
    fn devices(&self, vm: &VirtualMachine, running: bool) -> Vec<serde_json::Value> {
        // `size` is required by the schema; the simulator does not track image sizes.
        let mut devices: Vec<serde_json::Value> = vm
            .spec
            .block_device_refs
            .iter()
            .map(|d| json!({"kind": d.kind, "name": d.name, "size": "", "attached": running}))
            .collect();
        let state = self.state.lock().expect("sim state lock");
        for (vmbda, disk) in state.hotplugged.get(vm.name()).into_iter().flatten() {
            devices.push(json!({
                "kind": "VirtualDisk",
                "name": disk,
                "size": "",
                "attached": running,
                "hotplugged": true,
                "virtualMachineBlockDeviceAttachmentName": vmbda,
            }));
        }
        devices
    }

    /// Rewrites the block devices of VM `name` (when it has a status already; a VM without one
    /// gets them with its first phase).
    async fn write_devices(&self, name: &str) -> Result<(), SimError> {
        let vms = Api::<VirtualMachine>::namespaced(self.client.clone(), &self.namespace);
        let Some(vm) = vms.get_opt(name).await? else {
            return Ok(());
        };
        if vm.status.is_none() {
            return Ok(());
        }
        let patch = json!({"status": {"blockDeviceRefs": self.devices(&vm, vm.phase() == Some(VmPhase::Running))}});
        vms.patch_status(name, &status_params(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    fn knobs(&self) -> Knobs {
        self.knobs.lock().expect("knobs lock").clone()
    }

    /// Time since the simulator last touched `key` (first sight counts).
    fn since(&self, key: &str) -> Duration {
        let mut state = self.state.lock().expect("sim state lock");
        state
            .changed
            .entry(key.to_string())
            .or_insert_with(Instant::now)
            .elapsed()
    }

    fn touched(&self, key: &str) {
        let mut state = self.state.lock().expect("sim state lock");
        state.changed.insert(key.to_string(), Instant::now());
    }

    fn vm_ip(&self, name: &str) -> String {
        let knobs = self.knobs();
        if let Some(fixed) = knobs.vm_addresses.get(name) {
            return fixed.clone();
        }
        let prefix = knobs.vm_ip_prefix;
        let mut state = self.state.lock().expect("sim state lock");
        let next = state.vm_ips.len() as u32 + 10;
        state
            .vm_ips
            .entry(name.to_string())
            .or_insert_with(|| format!("{prefix}.{}.{}", next / 250, next % 250 + 1))
            .clone()
    }

    fn lb_ip(&self, name: &str) -> String {
        let mut state = self.state.lock().expect("sim state lock");
        let next = state.lb_ips.len() as u32 + 10;
        state
            .lb_ips
            .entry(name.to_string())
            .or_insert_with(|| format!("198.51.{}.{}", 100 + next / 250, next % 250 + 1))
            .clone()
    }
}

impl PlatformSim {
    /// Starts the controllers for `namespace`, writing as `admin`.
    pub fn start(admin: kube::Client, namespace: &str) -> PlatformSim {
        let knobs = Arc::new(Mutex::new(Knobs::default()));
        let ctx = Arc::new(Ctx {
            client: admin.clone(),
            namespace: namespace.to_string(),
            knobs: knobs.clone(),
            state: Mutex::new(SimState::default()),
        });
        let config = || watcher::Config::default();
        let mut nudges = Vec::new();
        let mut nudge = || {
            let (tx, rx) = unbounded::<()>();
            nudges.push(tx);
            rx
        };
        let vms = Controller::new(
            Api::<VirtualMachine>::namespaced(admin.clone(), namespace),
            config(),
        )
        .reconcile_all_on(nudge())
        .run(reconcile_vm, error_policy, ctx.clone())
        .for_each(|_| async {});
        let services = Controller::new(
            Api::<Service>::namespaced(admin.clone(), namespace),
            config(),
        )
        .reconcile_all_on(nudge())
        .run(reconcile_service, error_policy, ctx.clone())
        .for_each(|_| async {});
        let disks = Controller::new(
            Api::<VirtualDisk>::namespaced(admin.clone(), namespace),
            config(),
        )
        .reconcile_all_on(nudge())
        .run(reconcile_disk, error_policy, ctx.clone())
        .for_each(|_| async {});
        let attachments = Controller::new(
            Api::<VirtualMachineBlockDeviceAttachment>::namespaced(admin.clone(), namespace),
            config(),
        )
        .reconcile_all_on(nudge())
        .run(reconcile_attachment, error_policy, ctx.clone())
        .for_each(|_| async {});
        let swhc = swhc_resource();
        let swhcs = Controller::new_with(
            Api::<DynamicObject>::namespaced_with(admin.clone(), namespace, &swhc),
            config(),
            swhc,
        )
        .owns(Api::<Service>::namespaced(admin, namespace), config())
        .reconcile_all_on(nudge())
        .run(reconcile_swhc, error_policy, ctx)
        .for_each(|_| async {});
        PlatformSim {
            knobs,
            nudges,
            tasks: vec![
                tokio::spawn(vms),
                tokio::spawn(services),
                tokio::spawn(disks),
                tokio::spawn(attachments),
                tokio::spawn(swhcs),
            ],
        }
    }

    /// Changes the knobs; every object is looked at again right away.
    pub fn set_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        change(&mut self.knobs.lock().expect("knobs lock"));
        for nudge in &self.nudges {
            let _ = nudge.unbounded_send(());
        }
    }

    /// The current knobs.
    pub fn knobs(&self) -> Knobs {
        self.knobs.lock().expect("knobs lock").clone()
    }
}

impl Drop for PlatformSim {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn error_policy<K>(_: Arc<K>, error: &SimError, _: Arc<Ctx>) -> Action {
    tracing::debug!(%error, "platform simulator write failed; retrying");
    Action::requeue(RETRY)
}

fn status_params() -> PatchParams {
    PatchParams::default()
}

async fn reconcile_vm(vm: Arc<VirtualMachine>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    if vm.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = vm.name().to_string();
    let key = format!("vm/{name}");
    let knobs = ctx.knobs();
    let since = ctx.since(&key);
    let step = next_vm_step(
        &name,
        vm.phase(),
        vm.spec.run_policy.as_deref(),
        since,
        &knobs,
    );
    let phase = match step {
        Step::Idle => return Ok(Action::await_change()),
        Step::Wait(after) => return Ok(Action::requeue(after)),
        Step::Set(phase) => phase,
    };
    let old_ip = vm.ip_address().map(str::to_string);
    let ip = match phase {
        VmPhase::Running => ctx.vm_ip(&name),
        _ => old_ip.unwrap_or_default(),
    };
    let on_node = matches!(
        phase,
        VmPhase::Starting | VmPhase::Running | VmPhase::Stopping
    );
    let devices = ctx.devices(&vm, phase == VmPhase::Running);
    let status = json!({"status": {
        "phase": phase.as_str(),
        "nodeName": if on_node { PLATFORM_NODE } else { "" },
        "ipAddress": ip,
        "virtualMachineIPAddressName": format!("{name}-ipaddress"),
        "blockDeviceRefs": devices,
    }});
    Api::<VirtualMachine>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch_status(&name, &status_params(), &Patch::Merge(&status))
        .await?;
    ctx.touched(&key);
    Ok(Action::requeue(knobs.phase_delay.max(STALL_POLL)))
}

async fn reconcile_service(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let is_lb = svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
    let has_ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty());
    if !is_lb || has_ingress || svc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = svc.metadata.name.clone().unwrap_or_default();
    let key = format!("svc/{}", svc.metadata.uid.as_deref().unwrap_or(&name));
    let knobs = ctx.knobs();
    let since = ctx.since(&key);
    if knobs.stall_lbs {
        return Ok(Action::requeue(STALL_POLL));
    }
    if since < knobs.lb_delay {
        return Ok(Action::requeue(knobs.lb_delay - since));
    }
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ctx.lb_ip(&name)}]}}});
    Api::<Service>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch_status(&name, &status_params(), &Patch::Merge(&status))
        .await?;
    Ok(Action::await_change())
}

fn swhc_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "network.deckhouse.io",
            "v1alpha1",
            "ServiceWithHealthchecks",
        ),
        "servicewithhealthchecks",
    )
}

/// A ServiceWithHealthchecks of type LoadBalancer: its Service (same name, owned by it, its spec
/// without the health check), and that Service's ingress in its status.
async fn reconcile_swhc(swhc: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let mut spec = swhc.data["spec"].clone();
    if swhc.metadata.deletion_timestamp.is_some() || spec["type"] != "LoadBalancer" {
        return Ok(Action::await_change());
    }
    if let Some(map) = spec.as_object_mut() {
        map.remove("healthcheck");
    }
    let name = swhc.metadata.name.clone().unwrap_or_default();
    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ctx.namespace.clone()),
            labels: swhc.metadata.labels.clone(),
            annotations: swhc.metadata.annotations.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "network.deckhouse.io/v1alpha1".into(),
                kind: "ServiceWithHealthchecks".into(),
                name: name.clone(),
                uid: swhc.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: serde_json::from_value::<ServiceSpec>(spec).ok(),
        status: None,
    };
    let applied = Api::<Service>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &name,
            &PatchParams::apply("stratus-platform-sim").force(),
            &Patch::Apply(&service),
        )
        .await?;
    let ingress = applied
        .status
        .and_then(|s| s.load_balancer)
        .filter(|lb| lb.ingress.as_ref().is_some_and(|i| !i.is_empty()));
    if let Some(lb) = ingress {
        if swhc.data["status"]["loadBalancer"] != serde_json::to_value(&lb).unwrap_or_default() {
            let status = json!({"status": {"loadBalancer": lb}});
            Api::<DynamicObject>::namespaced_with(
                ctx.client.clone(),
                &ctx.namespace,
                &swhc_resource(),
            )
            .patch_status(&name, &status_params(), &Patch::Merge(&status))
            .await?;
        }
    }
    Ok(Action::await_change())
}

async fn reconcile_disk(disk: Arc<VirtualDisk>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let name = disk.metadata.name.clone().unwrap_or_default();
    let size = disk
        .spec
        .persistent_volume_claim
        .as_ref()
        .and_then(|p| p.size.clone())
        .unwrap_or_default();
    let status = disk.status.clone().unwrap_or_default();
    if disk.metadata.deletion_timestamp.is_some()
        || (status.phase == "Ready" && status.capacity.as_deref() == Some(size.as_str()))
    {
        return Ok(Action::await_change());
    }
    let key = format!("vd/{name}");
    let since = ctx.since(&key);
    let delay = ctx.knobs().disk_delay;
    if since < delay {
        return Ok(Action::requeue(delay - since));
    }
    let patch = json!({"status": {
        "phase": "Ready",
        "capacity": size,
        "target": {"persistentVolumeClaimName": format!("vd-{name}")},
    }});
    Api::<VirtualDisk>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch_status(&name, &status_params(), &Patch::Merge(&patch))
        .await?;
    ctx.touched(&key);
    Ok(Action::await_change())
}

async fn reconcile_attachment(
    vmbda: Arc<VirtualMachineBlockDeviceAttachment>,
    ctx: Arc<Ctx>,
) -> Result<Action, SimError> {
    let name = vmbda.metadata.name.clone().unwrap_or_default();
    let vm = vmbda.spec.virtual_machine_name.clone();
    let api =
        Api::<VirtualMachineBlockDeviceAttachment>::namespaced(ctx.client.clone(), &ctx.namespace);
    let finalizers = vmbda.metadata.finalizers.clone().unwrap_or_default();
    let ours = finalizers.iter().any(|f| f == VMBDA_FINALIZER);
    if vmbda.metadata.deletion_timestamp.is_some() {
        // Detach: the disk leaves the VM, then the object may go.
        let removed = {
            let mut state = ctx.state.lock().expect("sim state lock");
            state
                .hotplugged
                .get_mut(&vm)
                .and_then(|m| m.remove(&name))
                .is_some()
        };
        if removed {
            ctx.write_devices(&vm).await?;
        }
        if ours {
            let rest: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != VMBDA_FINALIZER)
                .collect();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": rest}})),
            )
            .await?;
        }
        return Ok(Action::await_change());
    }
    if !ours {
        let mut all = finalizers.clone();
        all.push(VMBDA_FINALIZER.into());
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": all}})),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let phase = vmbda
        .status
        .as_ref()
        .map(|s| s.phase.as_str())
        .unwrap_or_default();
    if matches!(phase, "Attached" | "Failed") {
        return Ok(Action::await_change());
    }
    let knobs = ctx.knobs();
    let key = format!("vmbda/{name}");
    let since = ctx.since(&key);
    let next = if knobs.failed_attachments.contains(&name) {
        "Failed"
    } else if knobs.stall_attachments || since < knobs.disk_delay {
        "InProgress"
    } else {
        "Attached"
    };
    if next == "Attached" {
        ctx.state
            .lock()
            .expect("sim state lock")
            .hotplugged
            .entry(vm.clone())
            .or_default()
            .insert(name.clone(), vmbda.spec.block_device_ref.name.clone());
        ctx.write_devices(&vm).await?;
    }
    if next != phase {
        let patch = json!({"status": {
            "phase": next,
            "virtualMachineName": vm,
        }});
        api.patch_status(&name, &status_params(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(match next {
        "InProgress" => {
            Action::requeue(STALL_POLL.min(knobs.disk_delay.max(Duration::from_millis(10))))
        }
        _ => Action::await_change(),
    })
}
