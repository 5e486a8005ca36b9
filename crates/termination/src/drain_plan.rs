//! The drain plan (pure): which pods are skipped (DaemonSet, mirror, our own), which refuse the
//! drain (kubectl-drain rules: DaemonSet pods without `--ignore-daemon-sets`, emptyDir pods
//! without `--delete-local-data`), and for the others the eviction grace period fitted to the
//! window the instance has left — so that every pod is gone, and its volumes can detach,
//! before the instance goes. Pods still present when the window closes are force-deleted if
//! they were evicted, and reported by name if they never could be (PodDisruptionBudget).

use jiff::{SignedDuration, Timestamp};

/// Time reserved before the deadline for volume detachment when pods use volumes (EBS detach
/// takes seconds once the pod is gone).
pub const DETACH_RESERVE: SignedDuration = SignedDuration::from_secs(15);
/// Time reserved before the deadline for the last API calls when no volumes are involved.
pub const API_RESERVE: SignedDuration = SignedDuration::from_secs(2);
/// A shortened grace period ends this long before the close, so that the kubelet can report
/// the pod gone before the force deletions start.
pub const GRACE_SLACK: i64 = 3;
/// kubectl's default when a pod sets no grace period.
pub const DEFAULT_POD_GRACE: i64 = 30;

/// What the plan needs to know about one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: tells a pod from a later one of the same name.
    pub uid: String,
    /// Kind of the controlling owner (`DaemonSet`, `ReplicaSet`, ...).
    pub controller_kind: Option<String>,
    /// A static pod's mirror (`kubernetes.io/config.mirror`).
    pub mirror: bool,
    /// Uses an emptyDir volume.
    pub local_storage: bool,
    /// Uses a volume that must detach from the instance (PVC, CSI, EBS).
    pub attached_volumes: bool,
    /// `spec.terminationGracePeriodSeconds` (None: 30 s).
    pub grace_seconds: Option<i64>,
    /// Succeeded or Failed.
    pub finished: bool,
    /// Already being deleted.
    pub terminating: bool,
    /// `spec.priority`.
    pub priority: i32,
}

impl PodView {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The drain settings from the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainSettings {
    /// `--ignore-daemon-sets` (default true): skip DaemonSet pods instead of refusing the drain.
    pub ignore_daemon_sets: bool,
    /// `--delete-local-data` (default true): evict emptyDir pods instead of refusing the drain.
    pub delete_local_data: bool,
    /// `--pod-termination-grace-period` when not negative.
    pub grace_override: Option<i64>,
    /// This handler's own pod (`--pod-name`, `--pod-namespace`): never evicted.
    pub own_pod: Option<(String, String)>,
}

/// Why a pod is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// A running DaemonSet pod with `--ignore-daemon-sets` (its controller would recreate it).
    DaemonSet,
    /// A static pod's mirror: the kubelet owns it, the API cannot evict it.
    Mirror,
    /// This handler's own pod.
    OwnPod,
}

/// Why a pod makes the drain refuse (kubectl drain's errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefuseReason {
    /// A running DaemonSet pod without `--ignore-daemon-sets`.
    DaemonSet,
    /// A running emptyDir pod without `--delete-local-data`.
    LocalStorage,
}

impl RefuseReason {
    /// The reason as reported in the drain error, naming the flag that would allow it.
    pub fn message(self) -> &'static str {
        match self {
            RefuseReason::DaemonSet => {
                "DaemonSet-managed (set --ignore-daemon-sets to leave such pods alone)"
            }
            RefuseReason::LocalStorage => {
                "uses local storage (emptyDir; set --delete-local-data to drain it anyway)"
            }
        }
    }
}

/// One planned eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// The pod to evict.
    pub pod: PodView,
    /// Grace period to send with the eviction.
    pub grace_seconds: i64,
    /// The pod's own grace period was cut to fit the window.
    pub shortened: bool,
    /// Already terminating: nothing to send, only wait.
    pub wait_only: bool,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainPlan {
    /// Pods left alone, and why.
    pub skipped: Vec<(PodView, SkipReason)>,
    /// Pods that make the drain refuse, and why; the drain goes ahead only if this is empty.
    pub refused: Vec<(PodView, RefuseReason)>,
    /// In eviction order: lowest priority first, then longest grace first (they take longest).
    pub evictions: Vec<Eviction>,
    /// When pods still present must be force-deleted (evicted ones) or given up (the others),
    /// leaving time for volumes to detach before the deadline.
    pub close_at: Timestamp,
    /// The instance's deadline the plan was fitted to.
    pub deadline: Timestamp,
}

impl DrainPlan {
    /// Whether the drain may go ahead (nothing refused).
    pub fn proceeds(&self) -> bool {
        self.refused.is_empty()
    }
}

/// Plans the drain of `pods` at `now` for an instance that goes at `deadline`.
pub fn plan_drain(
    pods: &[PodView],
    settings: &DrainSettings,
    now: Timestamp,
    deadline: Timestamp,
) -> DrainPlan {
    let mut skipped = Vec::new();
    let mut refused = Vec::new();
    let mut candidates = Vec::new();
    for pod in pods {
        let own = settings
            .own_pod
            .as_ref()
            .is_some_and(|(ns, name)| *name == pod.name && (ns.is_empty() || *ns == pod.namespace));
        if own {
            skipped.push((pod.clone(), SkipReason::OwnPod));
        } else if pod.mirror {
            skipped.push((pod.clone(), SkipReason::Mirror));
        } else if pod.controller_kind.as_deref() == Some("DaemonSet") && !pod.finished {
            if settings.ignore_daemon_sets {
                skipped.push((pod.clone(), SkipReason::DaemonSet));
            } else {
                refused.push((pod.clone(), RefuseReason::DaemonSet));
            }
        } else if pod.local_storage && !pod.finished && !settings.delete_local_data {
            refused.push((pod.clone(), RefuseReason::LocalStorage));
        } else {
            candidates.push(pod.clone());
        }
    }

    let reserve = if candidates.iter().any(|p| p.attached_volumes) {
        DETACH_RESERVE
    } else {
        API_RESERVE
    };
    let close_at = deadline.checked_sub(reserve).unwrap_or(deadline).max(now);
    let available = close_at.duration_since(now).as_secs().max(0);

    let mut evictions: Vec<Eviction> = candidates
        .into_iter()
        .map(|pod| {
            let wanted = if pod.finished {
                0
            } else {
                settings
                    .grace_override
                    .or(pod.grace_seconds)
                    .unwrap_or(DEFAULT_POD_GRACE)
                    .max(0)
            };
            let grace = if wanted <= available {
                wanted
            } else {
                (available - GRACE_SLACK).max(0)
            };
            Eviction {
                shortened: grace < wanted,
                wait_only: pod.terminating,
                grace_seconds: grace,
                pod,
            }
        })
        .collect();
    evictions.sort_by(|a, b| {
        a.pod
            .priority
            .cmp(&b.pod.priority)
            .then(b.grace_seconds.cmp(&a.grace_seconds))
            .then(a.pod.key().cmp(&b.pod.key()))
    });
    DrainPlan {
        skipped,
        refused,
        evictions,
        close_at,
        deadline,
    }
}

/// What became of the pods when the window closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// Gone after a graceful eviction.
    pub evicted: Vec<String>,
    /// Evicted but still terminating at the close: force-deleted so volumes detach.
    pub forced: Vec<String>,
    /// Never evicted (`namespace/name`, why): reported by name.
    pub not_evicted: Vec<(String, NotEvictedReason)>,
}

/// Why a pod could not be evicted in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotEvictedReason {
    /// The eviction was refused by a PodDisruptionBudget until the window closed.
    DisruptionBudget,
    /// The API kept failing.
    Error,
}

impl NotEvictedReason {
    /// Metric label and Event wording.
    pub fn as_str(self) -> &'static str {
        match self {
            NotEvictedReason::DisruptionBudget => "pdb",
            NotEvictedReason::Error => "error",
        }
    }
}

/// What to do with a pod still present when the window closes (pure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtClose {
    /// Delete it with a zero grace period so that its volumes can detach.
    ForceDelete,
    /// Leave it and report it as not evicted, for this reason.
    GiveUp(NotEvictedReason),
}

/// The close rule: an evicted (or already terminating) pod is force-deleted; a pod whose
/// eviction never went through is left alone (its PodDisruptionBudget is respected) and
/// reported.
pub fn at_close(evicted: bool, last_refusal: Option<NotEvictedReason>) -> AtClose {
    if evicted {
        AtClose::ForceDelete
    } else {
        AtClose::GiveUp(last_refusal.unwrap_or(NotEvictedReason::Error))
    }
}

/// The deadline a drain is fitted to: the event's, else `--node-termination-grace-period`
/// from now (upstream's drain timeout); never later than that timeout.
pub fn drain_deadline(
    event_deadline: Option<Timestamp>,
    now: Timestamp,
    node_grace: SignedDuration,
) -> Timestamp {
    let timeout = now.checked_add(node_grace).unwrap_or(Timestamp::MAX);
    match event_deadline {
        Some(d) => d.min(timeout),
        None => timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodView {
        PodView {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller_kind: Some("ReplicaSet".into()),
            mirror: false,
            local_storage: false,
            attached_volumes: false,
            grace_seconds: Some(30),
            finished: false,
            terminating: false,
            priority: 0,
        }
    }

    fn settings() -> DrainSettings {
        DrainSettings {
            ignore_daemon_sets: true,
            delete_local_data: true,
            grace_override: None,
            own_pod: Some(("kube-system".into(), "nth-abc".into())),
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + s).unwrap()
    }

    #[test]
    fn filters_follow_kubectl_drain() {
        let mut ds = pod("ds");
        ds.controller_kind = Some("DaemonSet".into());
        let mut mirror = pod("mirror");
        mirror.mirror = true;
        let mut own = pod("nth-abc");
        own.namespace = "kube-system".into();
        let mut local = pod("local");
        local.local_storage = true;
        let mut bare = pod("bare");
        bare.controller_kind = None;
        let pods = [ds.clone(), mirror, own, local.clone(), bare, pod("web")];

        let plan = plan_drain(&pods, &settings(), at(0), at(120));
        let skipped: Vec<_> = plan
            .skipped
            .iter()
            .map(|(p, r)| (p.name.as_str(), *r))
            .collect();
        assert_eq!(
            skipped,
            [
                ("ds", SkipReason::DaemonSet),
                ("mirror", SkipReason::Mirror),
                ("nth-abc", SkipReason::OwnPod)
            ]
        );
        assert!(plan.proceeds());
        let names: Vec<_> = plan.evictions.iter().map(|e| e.pod.name.as_str()).collect();
        assert_eq!(
            names,
            ["bare", "local", "web"],
            "unreplicated pods are evicted too (force)"
        );

        let strict = DrainSettings {
            ignore_daemon_sets: false,
            delete_local_data: false,
            ..settings()
        };
        let plan = plan_drain(&[ds, local], &strict, at(0), at(120));
        assert!(!plan.proceeds());
        let refused: Vec<_> = plan
            .refused
            .iter()
            .map(|(p, r)| (p.name.as_str(), *r))
            .collect();
        assert_eq!(
            refused,
            [
                ("ds", RefuseReason::DaemonSet),
                ("local", RefuseReason::LocalStorage)
            ]
        );
    }

    /// (pod grace, override, volumes, window seconds) → (grace sent, shortened, close offset)
    #[test]
    #[allow(clippy::type_complexity)] // a table test: one tuple per case reads best
    fn grace_is_fitted_to_the_window() {
        let cases: &[(Option<i64>, Option<i64>, bool, i64, i64, bool, i64)] = &[
            (Some(30), None, false, 120, 30, false, 118),
            (Some(300), None, false, 120, 115, true, 118),
            (Some(300), None, true, 120, 102, true, 105),
            (Some(118), None, false, 120, 118, false, 118),
            (None, None, false, 120, 30, false, 118),
            (Some(300), Some(10), false, 120, 10, false, 118),
            (Some(30), None, false, 1, 0, true, 0),
            (Some(30), None, true, -5, 0, true, 0),
        ];
        for &(grace, over, volumes, window, want_grace, want_short, want_close) in cases {
            let mut p = pod("p");
            p.grace_seconds = grace;
            p.attached_volumes = volumes;
            let s = DrainSettings {
                grace_override: over,
                ..settings()
            };
            let plan = plan_drain(&[p], &s, at(0), at(window));
            let e = &plan.evictions[0];
            assert_eq!(
                (e.grace_seconds, e.shortened, plan.close_at),
                (want_grace, want_short, at(want_close)),
                "case {grace:?} {over:?} {volumes} {window}"
            );
        }
    }

    #[test]
    fn twenty_mixed_pods_all_fit_a_two_minute_window() {
        let pods: Vec<PodView> = (0..20)
            .map(|i| {
                let mut p = pod(&format!("p{i:02}"));
                p.grace_seconds = Some([0, 5, 30, 60, 600][i % 5]);
                p.attached_volumes = i % 3 == 0;
                p.priority = (i % 4) as i32;
                p
            })
            .collect();
        let plan = plan_drain(&pods, &settings(), at(0), at(120));
        assert_eq!(plan.evictions.len(), 20);
        assert_eq!(plan.close_at, at(105), "volumes: detach reserve");
        for e in &plan.evictions {
            assert!(at(e.grace_seconds) <= plan.close_at, "{e:?}");
        }
        assert_eq!(plan.evictions.iter().filter(|e| e.shortened).count(), 4);
        // Lowest priority first, longest grace first within a priority.
        assert!(plan
            .evictions
            .windows(2)
            .all(|w| (w[0].pod.priority, -w[0].grace_seconds)
                <= (w[1].pod.priority, -w[1].grace_seconds)));
    }

    #[test]
    fn finished_and_terminating_pods() {
        let mut done = pod("done");
        done.finished = true;
        done.controller_kind = Some("DaemonSet".into());
        let mut going = pod("going");
        going.terminating = true;
        let strict = DrainSettings {
            ignore_daemon_sets: false,
            ..settings()
        };
        let plan = plan_drain(&[done, going], &strict, at(0), at(60));
        assert!(plan.proceeds(), "finished DaemonSet pods do not block");
        let done = plan
            .evictions
            .iter()
            .find(|e| e.pod.name == "done")
            .unwrap();
        assert_eq!(done.grace_seconds, 0, "finished pods need no grace");
        assert!(plan.evictions.iter().any(|e| e.wait_only));
    }

    #[test]
    fn close_rules() {
        assert_eq!(at_close(true, None), AtClose::ForceDelete);
        assert_eq!(
            at_close(false, Some(NotEvictedReason::DisruptionBudget)),
            AtClose::GiveUp(NotEvictedReason::DisruptionBudget)
        );
        assert_eq!(
            at_close(false, None),
            AtClose::GiveUp(NotEvictedReason::Error)
        );
        let grace = SignedDuration::from_secs(120);
        assert_eq!(drain_deadline(None, at(0), grace), at(120));
        assert_eq!(drain_deadline(Some(at(60)), at(0), grace), at(60));
        assert_eq!(drain_deadline(Some(at(3600)), at(0), grace), at(120));
    }

    proptest::proptest! {
        /// Whatever the pods and the window, every planned grace period ends by the close, the
        /// close is never before now nor after the deadline, and only shortened pods lose time.
        #[test]
        fn every_eviction_fits(
            graces in proptest::collection::vec(proptest::option::of(0i64..1000), 0..30),
            volumes in proptest::collection::vec(proptest::bool::ANY, 30),
            window in -30i64..600,
        ) {
            let pods: Vec<PodView> = graces.iter().enumerate().map(|(i, g)| {
                let mut p = pod(&format!("p{i}"));
                p.grace_seconds = *g;
                p.attached_volumes = volumes[i];
                p
            }).collect();
            let plan = plan_drain(&pods, &settings(), at(0), at(window));
            proptest::prop_assert!(plan.close_at >= at(0));
            proptest::prop_assert!(plan.close_at <= at(window.max(0)));
            for e in &plan.evictions {
                proptest::prop_assert!(at(e.grace_seconds) <= plan.close_at);
                let wanted = e.pod.grace_seconds.unwrap_or(DEFAULT_POD_GRACE);
                proptest::prop_assert_eq!(e.shortened, e.grace_seconds < wanted);
            }
        }
    }
}
