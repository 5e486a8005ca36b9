//! DVP as the behavioural scenarios see it: machines are VirtualMachines in the tenant
//! namespace of the parent cluster (created as the platform's administrator, as capdvp would,
//! labelled with the node name), stopped and started through `runPolicy`, driven by the
//! platform simulator of [`stratus_testenv::DvpEnv`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_dvp_api::labels::HOSTNAME;
use stratus_dvp_api::{BlockDeviceRef, Cpu, Memory, VirtualMachine, VirtualMachineSpec, VmPhase};

use crate::cloud_fixture::{CloudFixture, Machine};
use crate::wait_for;

/// How long a VM may take to run.
const RUNNING: Duration = Duration::from_secs(30);

/// The parent's VMs of one tenant namespace.
pub struct DvpFixture {
    /// VirtualMachines of the tenant namespace, as the parent's administrator.
    pub vms: Api<VirtualMachine>,
    /// The tenant namespace.
    pub namespace: String,
    /// Prefix of VM and node names (unique per test).
    pub prefix: String,
    /// The parent's audit log and the CCM's parent user, when the test counts the CCM's reads
    /// of VirtualMachines.
    pub reads: Option<(std::path::PathBuf, String)>,
    next: AtomicUsize,
}

/// A VM spec as capdvp writes one for a worker.
pub fn worker_spec() -> VirtualMachineSpec {
    VirtualMachineSpec {
        run_policy: Some("AlwaysOnUnlessStoppedManually".into()),
        virtual_machine_class_name: "generic".into(),
        cpu: Cpu {
            cores: 2,
            core_fraction: Some("100%".into()),
        },
        memory: Memory { size: "4Gi".into() },
        block_device_refs: vec![BlockDeviceRef {
            kind: "VirtualDisk".into(),
            name: "boot".into(),
        }],
        live_migration_policy: Some("PreferSafe".into()),
        os_type: Some("Generic".into()),
        enable_paravirtualization: Some(true),
        ..VirtualMachineSpec::default()
    }
}

impl DvpFixture {
    /// A fixture over `namespace` of the parent, writing as `parent_admin`.
    pub fn new(parent_admin: kube::Client, namespace: &str, prefix: &str) -> DvpFixture {
        DvpFixture {
            vms: Api::namespaced(parent_admin, namespace),
            namespace: namespace.into(),
            prefix: prefix.into(),
            reads: None,
            next: AtomicUsize::new(1),
        }
    }

    /// The same fixture, counting the `get`/`list` requests of VirtualMachines that `user` makes
    /// to the parent whose audit log is `audit_log`.
    pub fn counting_reads_of(mut self, audit_log: &std::path::Path, user: &str) -> DvpFixture {
        self.reads = Some((audit_log.to_path_buf(), user.to_owned()));
        self
    }

    /// Creates the VM `vm` for node `node` without waiting.
    pub async fn create_vm(&self, vm: &str, node: &str) -> anyhow::Result<()> {
        let mut object = VirtualMachine::new(vm, &self.namespace, worker_spec());
        object.metadata.labels = Some([(HOSTNAME.to_string(), node.to_string())].into());
        self.vms
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating VM {vm}"))?;
        Ok(())
    }

    /// Waits until `vm` runs with an address; returns the address.
    pub async fn running_ip(&self, vm: &str) -> anyhow::Result<String> {
        wait_for(&format!("VM {vm} Running with an IP"), RUNNING, || async {
            let found = self.vms.get(vm).await?;
            Ok((found.phase() == Some(VmPhase::Running))
                .then(|| found.ip_address().map(str::to_string))
                .flatten())
        })
        .await
    }

    async fn set_run_policy(&self, vm: &str, policy: &str) -> anyhow::Result<()> {
        self.vms
            .patch(
                vm,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"runPolicy": policy}})),
            )
            .await
            .with_context(|| format!("runPolicy {policy} on VM {vm}"))?;
        Ok(())
    }
}

#[async_trait]
impl CloudFixture for DvpFixture {
    async fn launch(&self, count: usize) -> anyhow::Result<Vec<Machine>> {
        let mut machines = Vec::new();
        for _ in 0..count {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let vm = format!("{}-vm-{n}", self.prefix);
            let node = format!("{}-node-{n}", self.prefix);
            self.create_vm(&vm, &node).await?;
            machines.push(Machine {
                provider_id: format!("dvp://{vm}"),
                id: vm,
                node_name: node,
            });
        }
        for m in &machines {
            self.running_ip(&m.id).await?;
        }
        Ok(machines)
    }

    async fn stop(&self, machine: &Machine) -> anyhow::Result<()> {
        self.set_run_policy(&machine.id, "AlwaysOff").await
    }

    async fn start(&self, machine: &Machine) -> anyhow::Result<()> {
        self.set_run_policy(&machine.id, "AlwaysOn").await
    }

    async fn terminate(&self, machine: &Machine) -> anyhow::Result<()> {
        self.vms
            .delete(&machine.id, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting VM {}", machine.id))?;
        Ok(())
    }

    async fn load_balancer_targets(&self, _: &Service) -> anyhow::Result<Option<Vec<String>>> {
        anyhow::bail!("the DVP provider has no load balancers yet")
    }

    async fn route_targets(&self, _: &str) -> anyhow::Result<Vec<Option<String>>> {
        anyhow::bail!("DVP has no routes")
    }

    /// The CCM's `get` and `list` requests of the parent's VirtualMachines (its watch is one
    /// long request, not a question asked per node).
    async fn cloud_requests(&self) -> anyhow::Result<u64> {
        let Some((audit_log, user)) = &self.reads else {
            anyhow::bail!("this DVP fixture does not count requests (see counting_reads_of)");
        };
        stratus_testenv::core::audit::reads_by(audit_log, user, "virtualmachines")
    }
}
