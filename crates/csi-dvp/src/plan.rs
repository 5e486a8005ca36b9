//! What ControllerPublish must do next, decided from the disk's attachments as the parent shows
//! them (pure). Transient states (an attachment in progress, one being removed) are answered
//! with a retryable error, never a permanent one; only a disk attached to another VM stops the
//! caller. An attachment the platform reports `Failed` is replaced: removed, and the caller's
//! retry attaches anew.

use stratus_csi::BackendError;
use stratus_dvp_api::VirtualMachineBlockDeviceAttachment;

/// The phase the platform reports for a finished hot plug.
pub const ATTACHED: &str = "Attached";
/// The phase the platform reports for a hot plug that cannot succeed.
pub const FAILED: &str = "Failed";

/// The next step of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishStep {
    /// Attached: answer.
    Done,
    /// Our attachment exists and is under way: wait for it.
    Wait,
    /// No attachment for this VM: create it.
    Create,
    /// Our attachment is `Failed`: remove it and let the caller retry (a hot plug can fail for
    /// a passing reason, e.g. the VM migrating; a Failed object is never retried by the platform).
    Replace,
}

fn phase(a: &VirtualMachineBlockDeviceAttachment) -> &str {
    a.status.as_ref().map(|s| s.phase.as_str()).unwrap_or("")
}

fn deleting(a: &VirtualMachineBlockDeviceAttachment) -> bool {
    a.metadata.deletion_timestamp.is_some()
}

/// Decides the next step of attaching the disk to `vm` through the attachment named `mine`,
/// given every attachment of the disk.
pub fn plan_publish(
    attachments: &[VirtualMachineBlockDeviceAttachment],
    vm: &str,
    mine: &str,
) -> Result<PublishStep, BackendError> {
    for a in attachments {
        let name = a.metadata.name.as_deref().unwrap_or_default();
        if name == mine || a.spec.virtual_machine_name == vm {
            continue;
        }
        let other = &a.spec.virtual_machine_name;
        if deleting(a) {
            return Err(BackendError::Unavailable(format!(
                "the disk is still being detached from VM {other} ({name}); retrying"
            )));
        }
        return Err(BackendError::FailedPrecondition(format!(
            "the disk is attached to VM {other} by {name} (phase {:?}); a DVP disk attaches to one VM",
            phase(a)
        )));
    }
    let Some(a) = attachments
        .iter()
        .find(|a| a.metadata.name.as_deref() == Some(mine))
    else {
        return Ok(PublishStep::Create);
    };
    if deleting(a) {
        return Err(BackendError::Unavailable(format!(
            "attachment {mine} is being removed; retrying once it is gone"
        )));
    }
    match phase(a) {
        ATTACHED => Ok(PublishStep::Done),
        FAILED => Ok(PublishStep::Replace),
        _ => Ok(PublishStep::Wait),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use stratus_dvp_api::VmbdaStatus;

    fn vmbda(
        name: &str,
        vm: &str,
        phase: &str,
        deleting: bool,
    ) -> VirtualMachineBlockDeviceAttachment {
        let mut a = VirtualMachineBlockDeviceAttachment::new(name, "ns", vm, "d");
        a.status = Some(VmbdaStatus {
            phase: phase.into(),
            virtual_machine_name: None,
        });
        if deleting {
            a.metadata.deletion_timestamp = Some(Time(Default::default()));
        }
        a
    }

    #[test]
    fn steps_and_codes() {
        use PublishStep::*;
        let mine = "vmbda-d-n1";
        assert_eq!(plan_publish(&[], "n1", mine), Ok(Create));
        let ok = [
            (vmbda(mine, "n1", "Attached", false), Done),
            (vmbda(mine, "n1", "Failed", false), Replace),
            (vmbda(mine, "n1", "InProgress", false), Wait),
            (vmbda(mine, "n1", "", false), Wait),
        ];
        for (a, want) in ok {
            assert_eq!(
                plan_publish(std::slice::from_ref(&a), "n1", mine),
                Ok(want),
                "{a:?}"
            );
        }
        let code = |list: &[VirtualMachineBlockDeviceAttachment]| {
            plan_publish(list, "n1", mine).unwrap_err().code()
        };
        use tonic::Code;
        assert_eq!(
            code(&[vmbda(mine, "n1", "Attached", true)]),
            Code::Unavailable
        );
        assert_eq!(
            code(&[vmbda("vmbda-d-n2", "n2", "Attached", false)]),
            Code::FailedPrecondition
        );
        assert_eq!(
            code(&[vmbda("vmbda-d-n2", "n2", "Attached", true)]),
            Code::Unavailable
        );
    }
}
