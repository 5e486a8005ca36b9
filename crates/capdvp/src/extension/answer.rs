//! The in-place hooks' answers as pure functions of their requests: CanUpdateMachine and
//! CanUpdateMachineSet cover the DeckhouseMachine (template) changes of [`super::inplace`] with a
//! merge patch and cover nothing of the Machine, MachineSet or bootstrap objects (a new
//! Kubernetes version or new bootstrap data needs a new machine); UpdateMachine's step compares
//! the parent VM with the desired DeckhouseMachine.

use serde_json::{json, Value};
use stratus_dvp_api::VirtualMachine;

use super::hooks::{
    CanUpdateMachineRequest, CanUpdateMachineResponse, CanUpdateMachineSetRequest,
    CanUpdateMachineSetResponse, Patch,
};
use super::inplace::{classify, merge_patch, spec_at};
use crate::api::capi::CONTROL_PLANE_LABEL;
use crate::api::infra::DeckhouseMachineSpec;
use crate::plan;

/// CanUpdateMachine: which DeckhouseMachine spec changes capdvp makes in place.
pub fn can_update_machine(request: &CanUpdateMachineRequest) -> CanUpdateMachineResponse {
    let verdict = classify(
        spec_at(&request.current.infrastructure_machine, &[]),
        spec_at(&request.desired.infrastructure_machine, &[]),
    );
    let patch = merge_patch(&verdict.covered, &[]).map(|p| Patch::merge(&p));
    CanUpdateMachineResponse::new(verdict.message(), patch)
}

/// CanUpdateMachineSet: which DeckhouseMachineTemplate `spec.template.spec` changes capdvp makes
/// in place.
pub fn can_update_machine_set(request: &CanUpdateMachineSetRequest) -> CanUpdateMachineSetResponse {
    let path = ["template", "spec"];
    let verdict = classify(
        spec_at(&request.current.infrastructure_machine_template, &path),
        spec_at(&request.desired.infrastructure_machine_template, &path),
    );
    let patch = merge_patch(&verdict.covered, &path).map(|p| Patch::merge(&p));
    CanUpdateMachineSetResponse::new(verdict.message(), patch)
}

/// What UpdateMachine does next for one machine.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateStep {
    /// The VM has the desired policies: the update is done.
    Done,
    /// Merge-patch the VM with this, then check again.
    PatchVm(Value),
    /// It cannot be done (the message says why).
    Failed(String),
}

/// The desired machine of an UpdateMachine request: its name, spec and role.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredMachine {
    /// The DeckhouseMachine's name (the VM's).
    pub name: String,
    /// Its desired spec.
    pub spec: DeckhouseMachineSpec,
    /// A control-plane machine (the Machine's label).
    pub control_plane: bool,
}

/// Reads the desired DeckhouseMachine and Machine of an UpdateMachine request.
pub fn desired_machine(
    machine: &Value,
    infrastructure_machine: &Value,
) -> Result<DesiredMachine, String> {
    let name = infrastructure_machine["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or("desired.infrastructureMachine has no metadata.name")?
        .to_string();
    let spec: DeckhouseMachineSpec = serde_json::from_value(infrastructure_machine["spec"].clone())
        .map_err(|e| format!("desired.infrastructureMachine.spec: {e}"))?;
    let control_plane = machine["metadata"]["labels"]
        .as_object()
        .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL));
    Ok(DesiredMachine {
        name,
        spec,
        control_plane,
    })
}

/// The next step for `desired` given the parent's VM (`None`: there is none).
pub fn update_step(desired: &DesiredMachine, vm: Option<&VirtualMachine>) -> UpdateStep {
    let Some(vm) = vm else {
        return UpdateStep::Failed(format!(
            "the parent has no VirtualMachine {}: nothing to update in place",
            crate::names::vm_name(&desired.name)
        ));
    };
    let run = plan::run_policy(&desired.spec);
    let migration = plan::live_migration_policy(&desired.spec, desired.control_plane);
    if vm.spec.run_policy.as_deref() == Some(run.as_str())
        && vm.spec.live_migration_policy.as_deref() == Some(migration.as_str())
    {
        return UpdateStep::Done;
    }
    UpdateStep::PatchVm(json!({"spec": {"runPolicy": run, "liveMigrationPolicy": migration}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::hooks::{MachineObjects, MachineSetObjects};
    use stratus_dvp_api::VirtualMachineSpec;

    fn dm(spec: Value) -> Value {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "DeckhouseMachine",
               "metadata": {"name": "w-1", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn can_update_machine_covers_policies_only() {
        let request = CanUpdateMachineRequest {
            current: MachineObjects {
                infrastructure_machine: dm(json!({"vmClassName": "a", "memory": "4Gi"})),
                ..MachineObjects::default()
            },
            desired: MachineObjects {
                infrastructure_machine: dm(
                    json!({"vmClassName": "a", "memory": "8Gi", "runPolicy": "AlwaysOn"}),
                ),
                ..MachineObjects::default()
            },
        };
        let answer = can_update_machine(&request);
        assert_eq!(answer.status, "Success");
        assert_eq!(
            answer.infrastructure_machine_patch.unwrap().document(),
            Some(json!({"spec": {"runPolicy": "AlwaysOn"}}))
        );
        assert!(answer.message.contains("memory"), "{}", answer.message);

        let same = CanUpdateMachineRequest {
            desired: request.current.clone(),
            current: request.current,
        };
        let answer = can_update_machine(&same);
        assert!(answer.infrastructure_machine_patch.is_none());
        let wire = serde_json::to_value(&answer).unwrap();
        assert!(wire.get("infrastructureMachinePatch").is_none(), "{wire}");
    }

    #[test]
    fn can_update_machine_set_patches_the_template_spec() {
        let template = |policy: &str| {
            json!({"kind": "DeckhouseMachineTemplate", "metadata": {"name": "t"},
                   "spec": {"template": {"spec": {"vmClassName": "a", "liveMigrationPolicy": policy}}}})
        };
        let request = CanUpdateMachineSetRequest {
            current: MachineSetObjects {
                infrastructure_machine_template: template("PreferSafe"),
                ..MachineSetObjects::default()
            },
            desired: MachineSetObjects {
                infrastructure_machine_template: template("AlwaysSafe"),
                ..MachineSetObjects::default()
            },
        };
        let answer = can_update_machine_set(&request);
        assert_eq!(
            answer
                .infrastructure_machine_template_patch
                .unwrap()
                .document(),
            Some(json!({"spec": {"template": {"spec": {"liveMigrationPolicy": "AlwaysSafe"}}}}))
        );
        assert_eq!(answer.message, "in place: liveMigrationPolicy");
    }

    fn vm(run: &str, migration: &str) -> VirtualMachine {
        VirtualMachine::new(
            "w-1",
            "parent",
            VirtualMachineSpec {
                run_policy: Some(run.into()),
                live_migration_policy: Some(migration.into()),
                ..VirtualMachineSpec::default()
            },
        )
    }

    #[test]
    fn update_steps() {
        let machine = json!({"metadata": {"labels": {"cluster.x-k8s.io/control-plane": ""}}});
        let desired = desired_machine(&machine, &dm(json!({"runPolicy": "AlwaysOn"}))).unwrap();
        assert!(desired.control_plane);
        assert_eq!(desired.name, "w-1");
        assert_eq!(
            update_step(&desired, Some(&vm("AlwaysOn", "PreferForced"))),
            UpdateStep::Done
        );
        assert_eq!(
            update_step(
                &desired,
                Some(&vm("AlwaysOnUnlessStoppedManually", "PreferForced"))
            ),
            UpdateStep::PatchVm(
                json!({"spec": {"runPolicy": "AlwaysOn", "liveMigrationPolicy": "PreferForced"}})
            )
        );
        let worker = desired_machine(&json!({}), &dm(json!({}))).unwrap();
        assert_eq!(
            update_step(
                &worker,
                Some(&vm("AlwaysOnUnlessStoppedManually", "PreferSafe"))
            ),
            UpdateStep::Done
        );
        assert!(matches!(update_step(&worker, None), UpdateStep::Failed(m) if m.contains("w-1")));
        assert!(desired_machine(&json!({}), &json!({"spec": {}})).is_err());
        assert!(desired_machine(&json!({}), &dm(json!({"cpu": "many"}))).is_err());
    }
}
