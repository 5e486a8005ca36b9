//! The platform simulator's decisions, apart from I/O: the next VirtualMachine phase from what
//! is observed, the knobs and the time since the last change.

use std::time::Duration;

use stratus_dvp_api::VmPhase;

use crate::sim::Knobs;

/// How often a stalled object is looked at again (so releasing a stall takes effect).
pub const STALL_POLL: Duration = Duration::from_millis(200);

/// What the simulator does with a VM now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet: look again after this long.
    Wait(Duration),
    /// Write this phase (and the status that goes with it).
    Set(VmPhase),
    /// Nothing to do until the VM changes.
    Idle,
}

/// Whether a VM with this `spec.runPolicy` should be running (`AlwaysOff` and `Manual` start off;
/// the platform default is `AlwaysOnUnlessStoppedManually`).
pub fn wants_running(run_policy: Option<&str>) -> bool {
    !matches!(run_policy, Some("AlwaysOff" | "Manual"))
}

/// The next step for a VM named `name` in `phase`, `since` the simulator last changed it.
pub fn next_vm_step(
    name: &str,
    phase: Option<VmPhase>,
    run_policy: Option<&str>,
    since: Duration,
    knobs: &Knobs,
) -> Step {
    let running = wants_running(run_policy);
    if knobs.degraded_vms.contains(name) {
        return if phase == Some(VmPhase::Degraded) {
            Step::Wait(STALL_POLL)
        } else {
            Step::Set(VmPhase::Degraded)
        };
    }
    let after = |next: VmPhase| {
        if since >= knobs.phase_delay {
            Step::Set(next)
        } else {
            Step::Wait(knobs.phase_delay - since)
        }
    };
    match phase {
        None => Step::Set(VmPhase::Pending),
        Some(VmPhase::Pending) if knobs.stall_vms => Step::Wait(STALL_POLL),
        Some(VmPhase::Pending) if running => after(VmPhase::Starting),
        Some(VmPhase::Pending) => after(VmPhase::Stopped),
        Some(VmPhase::Starting) if running => after(VmPhase::Running),
        Some(VmPhase::Starting) => after(VmPhase::Stopping),
        Some(VmPhase::Running) if !running => Step::Set(VmPhase::Stopping),
        Some(VmPhase::Stopping) => after(VmPhase::Stopped),
        Some(VmPhase::Stopped | VmPhase::Degraded) if running => after(VmPhase::Starting),
        Some(_) => Step::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VmPhase::*;

    const D: Duration = Duration::from_millis(100);

    fn knobs() -> Knobs {
        Knobs {
            phase_delay: D,
            ..Knobs::default()
        }
    }

    #[test]
    fn phases_advance_after_the_delay() {
        let k = knobs();
        let table: &[(Option<VmPhase>, Option<&str>, Duration, Step)] = &[
            (None, None, Duration::ZERO, Step::Set(Pending)),
            (Some(Pending), None, Duration::ZERO, Step::Wait(D)),
            (Some(Pending), None, D, Step::Set(Starting)),
            (Some(Starting), None, D, Step::Set(Running)),
            (Some(Running), None, D, Step::Idle),
            (
                Some(Running),
                Some("AlwaysOff"),
                Duration::ZERO,
                Step::Set(Stopping),
            ),
            (Some(Stopping), Some("AlwaysOff"), D, Step::Set(Stopped)),
            (Some(Stopped), Some("AlwaysOff"), D, Step::Idle),
            (Some(Stopped), Some("AlwaysOn"), D, Step::Set(Starting)),
            (Some(Pending), Some("Manual"), D, Step::Set(Stopped)),
            (Some(Degraded), None, D, Step::Set(Starting)),
            (Some(Migrating), None, D, Step::Idle),
        ];
        for (phase, policy, since, want) in table {
            assert_eq!(
                next_vm_step("vm", *phase, *policy, *since, &k),
                *want,
                "{phase:?} {policy:?} {since:?}"
            );
        }
    }

    #[test]
    fn stall_and_degrade_knobs() {
        let mut k = knobs();
        k.stall_vms = true;
        assert_eq!(
            next_vm_step("vm", Some(Pending), None, D * 10, &k),
            Step::Wait(STALL_POLL)
        );
        k.degraded_vms.insert("vm".into());
        assert_eq!(
            next_vm_step("vm", Some(Running), None, D, &k),
            Step::Set(Degraded)
        );
        assert_eq!(
            next_vm_step("vm", Some(Degraded), None, D, &k),
            Step::Wait(STALL_POLL)
        );
        assert_eq!(next_vm_step("other", None, None, D, &k), Step::Set(Pending));
    }
}
