//! The DeckhouseMachine reconciler: gathers what the caches know (the Cluster API Machine and
//! Cluster, the parent's VM, disks and attachments), asks [`crate::plan`] what that means, and
//! carries it out — the finalizer, the parent objects, `spec.providerID`, the status — or the
//! deletion, step by step, each step woken by the watch of what it waits for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};
use stratus_kube_kit::events::EventPublisher;
use stratus_kube_kit::store::wait_for_store;

use crate::api::capi::CLUSTER_NAME_LABEL;
use crate::api::infra::MACHINE_FINALIZER;
use crate::api::{Cluster, DeckhouseMachine, DeckhouseMachineStatus, Machine, CAPI_GROUP};
use crate::metrics::Metrics;
use crate::names;
use crate::parent::{Parent, ParentError};
use crate::plan::{self, reasons, Blocked, CapiView, DeleteStep, Leftovers, Prerequisites, Render};

/// How long to wait before looking again for things no watch reports (a bootstrap Secret that
/// is named but not there yet, a VM class or image that may be added to the parent).
const RECHECK: Duration = Duration::from_secs(10);
/// Resync of a settled machine (a safety net; watches do the work): `--sync-period`'s default,
/// Cluster API's.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(600);

/// The caches the reconciler reads instead of asking the apiservers.
#[derive(Clone)]
pub struct Caches {
    /// Cluster API Machines (management cluster).
    pub machines: Store<Machine>,
    /// Cluster API Clusters (management cluster).
    pub clusters: Store<Cluster>,
    /// The parent's VMs made by capdvp.
    pub vms: Store<VirtualMachine>,
    /// The parent's disks made by capdvp.
    pub disks: Store<VirtualDisk>,
    /// The parent's VMBDAs (any: the CSI driver makes them).
    pub attachments: Store<VirtualMachineBlockDeviceAttachment>,
}

impl Caches {
    /// Waits (bounded) until every cache listed once.
    pub async fn wait_synced(&self) -> Result<(), ReconcileError> {
        let all = async {
            // The shared wait: kube wakes only one waiter of a store, and machines reconcile
            // at once.
            let _ = tokio::join!(
                wait_for_store(&self.machines),
                wait_for_store(&self.clusters),
                wait_for_store(&self.vms),
                wait_for_store(&self.disks),
                wait_for_store(&self.attachments),
            );
        };
        tokio::time::timeout(Duration::from_secs(30), all)
            .await
            .map_err(|_| ReconcileError::NotSynced)
    }
}

/// Settings of the reconciler.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The tenant cluster's UUID (a label on parent objects).
    pub cluster_uuid: String,
    /// How long a deletion may take before what is left is marked orphaned and let go.
    pub delete_timeout: Duration,
    /// How often a settled machine is looked at again without any event (`--sync-period`).
    pub sync_period: Duration,
}

/// What the reconciler works with.
pub struct Context {
    /// The management cluster.
    pub mgmt: kube::Client,
    /// The parent cluster.
    pub parent: Parent,
    /// The caches.
    pub caches: Caches,
    /// The settings.
    pub settings: Settings,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Events on DeckhouseMachines.
    pub events: EventPublisher,
}

/// A failed reconcile (retried with a delay).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A parent call failed.
    #[error(transparent)]
    Parent(#[from] ParentError),
    /// A management-cluster call failed.
    #[error("management cluster: {0}")]
    Kube(#[from] kube::Error),
    /// The caches have not listed yet (an apiserver is unreachable).
    #[error("the watches have not listed their objects yet")]
    NotSynced,
}

fn now() -> Time {
    Time(Timestamp::now())
}

fn owner_machine(dm: &DeckhouseMachine) -> Option<String> {
    dm.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "Machine" && o.api_version.starts_with(&format!("{CAPI_GROUP}/")))
        .map(|o| o.name.clone())
}

/// Reconciles one DeckhouseMachine.
pub async fn reconcile(
    dm: Arc<DeckhouseMachine>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    // Decisions read the caches: never before they listed once (a VM not yet listed is not
    // a VM that is missing).
    ctx.caches.wait_synced().await?;
    let result = if dm.is_deleting() {
        delete(&dm, &ctx).await
    } else {
        apply(&dm, &ctx).await
    };
    ctx.metrics.reconciled(
        "DeckhouseMachine",
        if result.is_ok() { "ok" } else { "error" },
    );
    result
}

/// What to do after a failed reconcile.
pub fn error_policy(
    dm: Arc<DeckhouseMachine>,
    error: &ReconcileError,
    _ctx: Arc<Context>,
) -> Action {
    tracing::warn!(machine = %dm.name(), namespace = %dm.namespace(), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

fn machines(ctx: &Context, ns: &str) -> Api<DeckhouseMachine> {
    Api::namespaced(ctx.mgmt.clone(), ns)
}

async fn patch_status(
    ctx: &Context,
    dm: &DeckhouseMachine,
    status: &DeckhouseMachineStatus,
) -> Result<(), ReconcileError> {
    if !plan::needs_patch(dm, status) {
        return Ok(());
    }
    machines(ctx, dm.namespace())
        .patch_status(
            dm.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    Ok(())
}

async fn block(ctx: &Context, dm: &DeckhouseMachine, why: &Blocked) -> Result<(), ReconcileError> {
    let current = dm.status.clone().unwrap_or_default();
    let was = current
        .conditions
        .iter()
        .any(|c| c.reason == why.reason && c.message == why.message);
    patch_status(ctx, dm, &plan::status_blocked(&current, why, now())).await?;
    if !was {
        tracing::info!(machine = %dm.name(), reason = why.reason, "{}", why.message);
    }
    Ok(())
}

fn capi_view(dm: &DeckhouseMachine, caches: &Caches) -> CapiView {
    let ns = dm.namespace();
    let machine =
        owner_machine(dm).and_then(|name| caches.machines.get(&ObjectRef::new(&name).within(ns)));
    let cluster = machine
        .as_ref()
        .map(|m| m.spec.cluster_name.clone())
        .filter(|c| !c.is_empty())
        .or_else(|| {
            dm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_NAME_LABEL).cloned())
        })
        .unwrap_or_default();
    let provisioned = !cluster.is_empty()
        && caches
            .clusters
            .get(&ObjectRef::new(&cluster).within(ns))
            .is_some_and(|c| c.infrastructure_provisioned());
    CapiView {
        owned: machine.is_some(),
        cluster,
        cluster_provisioned: provisioned,
        data_secret: machine
            .as_ref()
            .and_then(|m| m.data_secret_name().map(String::from)),
    }
}

async fn prerequisites(
    ctx: &Context,
    dm: &DeckhouseMachine,
) -> Result<Prerequisites, ReconcileError> {
    let spec = &dm.spec;
    let class = ctx
        .parent
        .exists(
            "VirtualMachineClass",
            "virtualmachineclasses",
            false,
            &spec.vm_class_name,
        )
        .await?;
    let image = &spec.boot_disk_image_ref;
    let image = match image.kind.as_str() {
        "ClusterVirtualImage" => {
            ctx.parent
                .exists(
                    "ClusterVirtualImage",
                    "clustervirtualimages",
                    false,
                    &image.name,
                )
                .await?
        }
        "VirtualDiskSnapshot" => {
            ctx.parent
                .exists(
                    "VirtualDiskSnapshot",
                    "virtualdisksnapshots",
                    true,
                    &image.name,
                )
                .await?
        }
        _ => {
            ctx.parent
                .exists("VirtualImage", "virtualimages", true, &image.name)
                .await?
        }
    };
    Ok(Prerequisites { class, image })
}

async fn bootstrap_data(
    ctx: &Context,
    ns: &str,
    secret: &str,
) -> Result<Option<Vec<u8>>, ReconcileError> {
    let found = Api::<Secret>::namespaced(ctx.mgmt.clone(), ns)
        .get_opt(secret)
        .await?;
    Ok(found
        .and_then(|s| s.data)
        .and_then(|mut d| d.remove(names::BOOTSTRAP_KEY))
        .map(|b| b.0))
}

async fn apply(dm: &DeckhouseMachine, ctx: &Context) -> Result<Action, ReconcileError> {
    let ns = dm.namespace();
    let name = dm.name();
    if !dm.has_finalizer() {
        let mut finalizers = dm.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(MACHINE_FINALIZER.to_string());
        machines(ctx, ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
            )
            .await?;
    }
    let mut dm = dm.clone();
    dm.spec = dm.spec.clone().with_defaults();
    let capi = capi_view(&dm, &ctx.caches);
    let vm_name = names::vm_name(name);
    let parent_ns = ctx.parent.namespace().to_string();
    let control_plane = owner_machine(&dm)
        .and_then(|m| ctx.caches.machines.get(&ObjectRef::new(&m).within(ns)))
        .is_some_and(|m| m.is_control_plane());
    let render = Render {
        namespace: ns,
        machine: name,
        spec: &dm.spec,
        parent_namespace: &parent_ns,
        cluster_uuid: &ctx.settings.cluster_uuid,
        control_plane,
    };
    let cached_vm = ctx
        .caches
        .vms
        .get(&ObjectRef::new(&vm_name).within(&parent_ns));
    let status = dm.status.clone().unwrap_or_default();
    let recorded = status
        .initialization
        .as_ref()
        .and_then(|i| i.bootstrap_data_secret_created)
        .unwrap_or(false);

    let vm = match cached_vm {
        Some(vm) => (*vm).clone(),
        None => {
            if let Some(why) = plan::waiting_for(&capi) {
                block(ctx, &dm, &why).await?;
                return Ok(Action::requeue(ctx.settings.sync_period));
            }
            if !recorded {
                let found = prerequisites(ctx, &dm).await?;
                if let Some(why) = plan::missing_prerequisite(&dm.spec, found) {
                    block(ctx, &dm, &why).await?;
                    return Ok(Action::requeue(RECHECK));
                }
            }
            let secret = capi.data_secret.clone().unwrap_or_default();
            let Some(data) = bootstrap_data(ctx, ns, &secret).await? else {
                let why = Blocked {
                    reason: reasons::WAITING_FOR_BOOTSTRAP,
                    message: format!("bootstrap data Secret {secret:?} has no key \"value\" yet"),
                };
                block(ctx, &dm, &why).await?;
                return Ok(Action::requeue(RECHECK));
            };
            let vm = match ctx.parent.create_vm(&render.vm()).await {
                Ok(vm) => vm,
                Err(ParentError::Refused { message, .. }) => {
                    let why = Blocked {
                        reason: reasons::VM_REFUSED,
                        message: format!(
                            "the parent refused VirtualMachine {vm_name} (VirtualMachineClass {:?}): {message}",
                            dm.spec.vm_class_name
                        ),
                    };
                    ctx.events
                        .publish(
                            &dm,
                            true,
                            reasons::VM_REFUSED,
                            "CreateVM",
                            why.message.clone(),
                        )
                        .await;
                    block(ctx, &dm, &why).await?;
                    return Ok(Action::requeue(RECHECK * 3));
                }
                Err(e) => return Err(e.into()),
            };
            ensure_children(ctx, &render, &vm, Some(data.as_slice()), &[]).await?;
            record_created(ctx, &dm, &vm_name).await?;
            return Ok(Action::requeue(ctx.settings.sync_period));
        }
    };

    // The VM exists: its disks and Secret too (a create cut short by a crash is finished here).
    let present: Vec<String> = render
        .disk_names()
        .into_iter()
        .filter(|d| {
            ctx.caches
                .disks
                .get(&ObjectRef::new(d).within(&parent_ns))
                .is_some()
        })
        .collect();
    if present.len() < render.disk_names().len() || !recorded {
        let data = if recorded {
            None
        } else {
            match capi.data_secret.as_deref() {
                Some(secret) => bootstrap_data(ctx, ns, secret).await?,
                None => None,
            }
        };
        ensure_children(ctx, &render, &vm, data.as_deref(), &present).await?;
        if !recorded && data.is_some() {
            record_created(ctx, &dm, &vm_name).await?;
            return Ok(Action::requeue(ctx.settings.sync_period));
        }
    }
    if dm.spec.provider_id.is_none() {
        set_provider_id(ctx, &dm, &vm_name).await?;
    }
    let has_node = owner_machine(&dm)
        .and_then(|m| ctx.caches.machines.get(&ObjectRef::new(&m).within(ns)))
        .is_some_and(|m| m.has_node_ref());
    let view = plan::vm_view(&vm, has_node);
    let desired = plan::status_for_vm(&status, &view, now());
    if desired.ready && !status.ready {
        if let Some(created) = &dm.metadata.creation_timestamp {
            let seconds = Timestamp::now().duration_since(created.0).as_secs_f64();
            ctx.metrics.machine_ready(seconds.max(0.0));
        }
        tracing::info!(machine = %name, vm = %vm_name, "VM running: machine ready");
    }
    patch_status(ctx, &dm, &desired).await?;
    Ok(Action::requeue(ctx.settings.sync_period))
}

async fn ensure_children(
    ctx: &Context,
    render: &Render<'_>,
    vm: &VirtualMachine,
    bootstrap: Option<&[u8]>,
    present: &[String],
) -> Result<(), ReconcileError> {
    let owner = plan::vm_owner(vm);
    if let Some(data) = bootstrap {
        ctx.parent
            .create_secret(&render.cloud_init(data, &owner))
            .await?;
    }
    for disk in render.disks(&owner) {
        if present
            .iter()
            .any(|p| Some(p) == disk.metadata.name.as_ref())
        {
            continue;
        }
        ctx.parent.create_disk(&disk).await?;
    }
    Ok(())
}

async fn set_provider_id(
    ctx: &Context,
    dm: &DeckhouseMachine,
    vm: &str,
) -> Result<(), ReconcileError> {
    machines(ctx, dm.namespace())
        .patch(
            dm.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": names::provider_id(vm)}})),
        )
        .await?;
    Ok(())
}

async fn record_created(
    ctx: &Context,
    dm: &DeckhouseMachine,
    vm: &str,
) -> Result<(), ReconcileError> {
    set_provider_id(ctx, dm, vm).await?;
    let mut status = dm.status.clone().unwrap_or_default();
    let mut init = status.initialization.clone().unwrap_or_default();
    init.bootstrap_data_secret_created = Some(true);
    status.initialization = Some(init);
    let condition = plan::vm_condition(
        &status.conditions,
        false,
        reasons::VM_NOT_READY,
        &format!("VirtualMachine {vm} created, waiting for it to run"),
        now(),
    );
    let status = plan::with_condition(status, condition);
    patch_status(ctx, dm, &status).await
}

fn leftovers(ctx: &Context, dm: &DeckhouseMachine) -> Leftovers {
    let parent_ns = ctx.parent.namespace();
    let vm = names::vm_name(dm.name());
    let spec = dm.spec.clone().with_defaults();
    let render = Render {
        namespace: dm.namespace(),
        machine: dm.name(),
        spec: &spec,
        parent_namespace: parent_ns,
        cluster_uuid: "",
        control_plane: false,
    };
    let attachments = ctx
        .caches
        .attachments
        .state()
        .iter()
        .filter(|a| {
            a.metadata.namespace.as_deref() == Some(parent_ns)
                && (a.spec.virtual_machine_name == vm
                    || a.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(names::VMBDA_VM_LABEL))
                        == Some(&vm))
        })
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    Leftovers {
        attachments,
        vm: ctx
            .caches
            .vms
            .get(&ObjectRef::new(&vm).within(parent_ns))
            .map(|_| vm.clone()),
        disks: render
            .disk_names()
            .into_iter()
            .filter(|d| {
                ctx.caches
                    .disks
                    .get(&ObjectRef::new(d).within(parent_ns))
                    .is_some()
            })
            .collect(),
    }
}

async fn delete(dm: &DeckhouseMachine, ctx: &Context) -> Result<Action, ReconcileError> {
    if !dm.has_finalizer() {
        return Ok(Action::await_change());
    }
    let mut left = leftovers(ctx, dm);
    if plan::delete_step(&left, false) == DeleteStep::Done {
        // The caches say nothing is left; a watch that missed an event (the parent was away)
        // must not let the machine go with objects behind: ask the parent directly.
        let (vm, disks) = ctx
            .parent
            .machine_objects(dm.namespace(), dm.name())
            .await?;
        left.vm = vm;
        left.disks = disks;
    }
    let started = dm
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(Timestamp::now);
    let elapsed = Timestamp::now().duration_since(started).unsigned_abs();
    let timeout = ctx.settings.delete_timeout;
    let expired = elapsed >= timeout;
    let remaining = timeout.saturating_sub(elapsed).max(Duration::from_secs(1));
    let vm = names::vm_name(dm.name());
    match plan::delete_step(&left, expired) {
        DeleteStep::Detach(attachments) => {
            for a in attachments {
                ctx.parent.delete_attachment(&a).await?;
            }
        }
        DeleteStep::DeleteVm => ctx.parent.delete_vm(&vm).await?,
        DeleteStep::DeleteDisks(disks) => {
            for d in disks {
                ctx.parent.delete_disk(&d).await?;
            }
            ctx.parent
                .delete_secret(&names::cloud_init_secret(&vm))
                .await?;
        }
        DeleteStep::Done => {
            ctx.parent
                .delete_secret(&names::cloud_init_secret(&vm))
                .await?;
            release(ctx, dm).await?;
            return Ok(Action::await_change());
        }
        DeleteStep::Orphan { vm, disks } => {
            // One write marks what is left and lets the machine go: a separate annotation
            // patch would move the resourceVersion the release is conditioned on, fail it, and
            // report the same leftovers again on the retry.
            let notes = plan::orphan_annotations(vm.as_deref(), &disks);
            let what: Vec<String> = vm
                .iter()
                .map(|v| format!("VirtualMachine {v}"))
                .chain(disks.iter().map(|d| format!("VirtualDisk {d}")))
                .collect();
            let note = format!(
                "deletion did not finish within {} s; left in the parent namespace {}: {}",
                timeout.as_secs(),
                ctx.parent.namespace(),
                what.join(", ")
            );
            tracing::warn!(machine = %dm.name(), "{note}");
            // Published while the machine still exists (its release may delete it at once), so
            // the Event is there when the machine is gone; a failed release retries both.
            ctx.events
                .publish(dm, true, "OrphanedResources", "Delete", note)
                .await;
            release_with(ctx, dm, &notes).await?;
            if vm.is_some() {
                ctx.metrics.orphaned("VirtualMachine");
            }
            for _ in &disks {
                ctx.metrics.orphaned("VirtualDisk");
            }
            return Ok(Action::await_change());
        }
    }
    // Woken by the watch when the objects go; looked at again within RECHECK × 3 even so (an
    // event lost while a parent watch reconnected must not hold the machine until the
    // deadline), and at the deadline at the latest.
    Ok(Action::requeue(remaining.min(RECHECK * 3)))
}

async fn release(ctx: &Context, dm: &DeckhouseMachine) -> Result<(), ReconcileError> {
    release_with(ctx, dm, &BTreeMap::new()).await
}

/// Removes the finalizer (conditioned on the resourceVersion `dm` was read at) and sets
/// `annotations` in the same write.
async fn release_with(
    ctx: &Context,
    dm: &DeckhouseMachine,
    annotations: &BTreeMap<String, String>,
) -> Result<(), ReconcileError> {
    let finalizers: Vec<String> = dm
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != MACHINE_FINALIZER)
        .collect();
    let mut patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": dm.metadata.resource_version}});
    if !annotations.is_empty() {
        patch["metadata"]["annotations"] = json!(annotations);
    }
    match machines(ctx, dm.namespace())
        .patch(dm.name(), &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
