//! Readiness: named conditions the application sets (e.g. "caches synced") and may unset again
//! (e.g. "the watch broke"), reported by `/readyz` in the upstream format (`[+]name ok` /
//! `[-]name failed: reason`); and liveness conditions, met until unset (e.g. "the cloud answered
//! no retry"), reported the same way by `/healthz` and `/livez`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The set of conditions; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    checks: Mutex<Vec<Arc<Check>>>,
    liveness: Mutex<Vec<Arc<Check>>>,
    shutting_down: AtomicBool,
}

#[derive(Debug)]
struct Check {
    name: String,
    /// Why the condition is unmet (meaningful while `done` is false).
    reason: Mutex<String>,
    done: AtomicBool,
}

/// One condition; [`ReadyFlag::set`] marks it met, [`ReadyFlag::unset`] unmet again.
#[derive(Debug, Clone)]
pub struct ReadyFlag(Arc<Check>);

impl ReadyFlag {
    /// The condition is met.
    pub fn set(&self) {
        if !self.0.done.swap(true, Ordering::AcqRel) {
            tracing::info!(check = %self.0.name, "readiness condition met");
        }
    }

    /// Marks the condition unmet, with `reason` as `/readyz` gives it.
    pub fn unset(&self, reason: &str) {
        *self.0.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason.to_string();
        if self.0.done.swap(false, Ordering::AcqRel) {
            tracing::warn!(check = %self.0.name, reason, "readiness condition no longer met");
        }
    }

    /// Whether the condition is met.
    pub fn is_set(&self) -> bool {
        self.0.done.load(Ordering::Acquire)
    }
}

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Whether every condition is met.
    pub ready: bool,
    /// `ok`, or one line per condition when not ready (or when `verbose`).
    pub body: String,
}

impl Readiness {
    /// Adds a condition, unmet until its flag is set; `reason` says what is awaited.
    pub fn add(&self, name: &str, reason: &str) -> ReadyFlag {
        let check = Arc::new(Check {
            name: name.to_string(),
            reason: Mutex::new(reason.to_string()),
            done: AtomicBool::new(false),
        });
        self.lock().push(check.clone());
        ReadyFlag(check)
    }

    /// Adds a liveness condition, met until its flag is unset.
    pub fn add_liveness(&self, name: &str) -> ReadyFlag {
        let check = Arc::new(Check {
            name: name.to_string(),
            reason: Mutex::new(String::new()),
            done: AtomicBool::new(true),
        });
        lock(&self.inner.liveness).push(check.clone());
        ReadyFlag(check)
    }

    /// What `/healthz` and `/livez` answer: `ok` while every liveness condition is met.
    pub fn liveness(&self) -> Report {
        let checks = lock(&self.inner.liveness).clone();
        if checks.iter().all(|c| c.done.load(Ordering::Acquire)) {
            return Report {
                ready: true,
                body: "ok".into(),
            };
        }
        let mut body = check_lines(&checks);
        body.push_str("healthz check failed\n");
        Report { ready: false, body }
    }

    /// Whether any condition was added.
    pub fn has_conditions(&self) -> bool {
        !self.lock().is_empty()
    }

    /// From now on not ready: the process is stopping.
    pub fn shutting_down(&self) {
        self.inner.shutting_down.store(true, Ordering::Release);
    }

    /// The answer now; `verbose` lists every condition even when ready.
    pub fn report(&self, verbose: bool) -> Report {
        let checks = self.lock().clone();
        let stopping = self.inner.shutting_down.load(Ordering::Acquire);
        let ready = !stopping && checks.iter().all(|c| c.done.load(Ordering::Acquire));
        if ready && !verbose {
            return Report {
                ready,
                body: "ok".into(),
            };
        }
        let mut body = check_lines(&checks);
        if stopping {
            body.push_str("[-]shutdown failed: the process is shutting down\n");
        } else {
            body.push_str("[+]shutdown ok\n");
        }
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        Report { ready, body }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Check>>> {
        lock(&self.inner.checks)
    }
}

/// `[+]ping ok`, then `[+]name ok` or `[-]name failed: reason` per check (upstream's format).
fn check_lines(checks: &[Arc<Check>]) -> String {
    let mut body = String::from("[+]ping ok\n");
    for c in checks {
        if c.done.load(Ordering::Acquire) {
            let _ = writeln!(body, "[+]{} ok", c.name);
        } else {
            let _ = writeln!(body, "[-]{} failed: {}", c.name, lock(&c.reason));
        }
    }
    body
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_condition_is_met() {
        let r = Readiness::default();
        let informer = r.add("informer-sync", "nodes not listed yet");
        let cache = r.add("instance-cache-sync", "instances not listed yet");
        let before = r.report(false);
        assert!(!before.ready);
        assert!(
            before
                .body
                .contains("[-]informer-sync failed: nodes not listed yet"),
            "{}",
            before.body
        );
        assert!(before.body.ends_with("readyz check failed\n"));
        informer.set();
        let half = r.report(false);
        assert!(!half.ready);
        assert!(half.body.contains("[+]informer-sync ok"), "{}", half.body);
        assert!(half.body.contains("[-]instance-cache-sync failed"));
        cache.set();
        assert!(cache.is_set());
        assert_eq!(
            r.report(false),
            Report {
                ready: true,
                body: "ok".into()
            }
        );
        assert!(r.report(true).body.contains("[+]instance-cache-sync ok"));
        assert!(r.report(true).body.ends_with("readyz check passed\n"));
    }

    #[test]
    fn liveness_fails_while_a_liveness_condition_is_unset() {
        let r = Readiness::default();
        assert!(r.liveness().ready);
        let cloud = r.add_liveness("cloud-discovery");
        assert_eq!(r.liveness().body, "ok");
        cloud.unset("DescribeInstanceTypes: retries exhausted");
        let failed = r.liveness();
        assert!(!failed.ready);
        assert!(
            failed
                .body
                .contains("[-]cloud-discovery failed: DescribeInstanceTypes: retries exhausted"),
            "{}",
            failed.body
        );
        // Liveness is not readiness.
        assert!(r.report(false).ready);
        cloud.set();
        assert!(r.liveness().ready);
    }

    #[test]
    fn no_conditions_means_ready_and_shutdown_means_not() {
        let r = Readiness::default();
        assert!(r.report(false).ready);
        r.clone().shutting_down();
        let after = r.report(false);
        assert!(!after.ready);
        assert!(after.body.contains("[-]shutdown failed"), "{}", after.body);
    }

    #[test]
    fn an_unset_condition_fails_with_its_new_reason_until_set_again() {
        let r = Readiness::default();
        let watch = r.add("node-informer-sync", "nodes not listed yet");
        watch.set();
        assert!(r.report(false).ready);
        watch.unset("the Node watch is broken: connection refused");
        let broken = r.report(false);
        assert!(!broken.ready);
        assert!(
            broken.body.contains(
                "[-]node-informer-sync failed: the Node watch is broken: connection refused"
            ),
            "{}",
            broken.body
        );
        assert!(!watch.is_set());
        watch.set();
        assert!(r.report(false).ready);
    }
}
