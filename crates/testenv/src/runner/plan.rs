//! Which test runs when: the longest tests of the last run start first so the slowest one does not
//! begin last, tests never timed before (new tests) start before the known-fast ones, and an
//! integration test is assumed slower than a unit test.

use std::collections::BTreeMap;

/// The seconds each test took on the last run, by `binary key::test name`.
pub type Timings = BTreeMap<String, f64>;

/// One test to run: which binary and its exact name.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Index into the test binaries.
    pub binary: usize,
    /// The test's full path inside its binary.
    pub name: String,
    /// `binary key::test name`, the key in [`Timings`].
    pub key: String,
    /// Of an integration test binary.
    pub integration: bool,
    /// Needs the machine's one real cluster (see [`SERIAL_PACKAGES`]): such tests run one at a
    /// time, others beside them.
    pub serial: bool,
}

/// Packages whose integration tests each start the real one-node cluster, of which the machine
/// holds one at a time (a lock): two of them at once would keep a slot waiting for the lock.
pub const SERIAL_PACKAGES: &[&str] = &["stratus-e2e"];

/// The next job to start from `pending` (in planned order): the first one, unless it is serial
/// while a serial job runs, then the first one that is not; none when only serial jobs wait.
pub fn next(pending: &[Job], serial_running: bool) -> Option<usize> {
    pending
        .iter()
        .position(|job| !(job.serial && serial_running))
}

/// Unknown integration tests count as this slow, so they start among the slow ones.
const UNKNOWN_INTEGRATION_SECONDS: f64 = 30.0;
/// Unknown unit tests count as this slow.
const UNKNOWN_UNIT_SECONDS: f64 = 0.5;

/// The jobs in the order they should start: longest expected first, ties by key.
pub fn order(mut jobs: Vec<Job>, timings: &Timings) -> Vec<Job> {
    let expected = |job: &Job| {
        timings
            .get(&job.key)
            .copied()
            .unwrap_or(if job.integration {
                UNKNOWN_INTEGRATION_SECONDS
            } else {
                UNKNOWN_UNIT_SECONDS
            })
    };
    jobs.sort_by(|a, b| {
        expected(b)
            .total_cmp(&expected(a))
            .then_with(|| a.key.cmp(&b.key))
    });
    jobs
}

/// The timings to keep after a run: this run's for the tests it ran, the old ones for tests it
/// did not run; a test that no longer exists in a binary this run listed is forgotten, while the
/// binaries it did not list (a `-p` run) keep theirs.
pub fn merged(old: &Timings, ran: &Timings, listed: &[Job]) -> Timings {
    let binaries: std::collections::BTreeSet<&str> =
        listed.iter().map(|job| binary_of(&job.key)).collect();
    let mut kept: Timings = old
        .iter()
        .filter(|(key, _)| !binaries.contains(binary_of(key)))
        .map(|(key, seconds)| (key.clone(), *seconds))
        .collect();
    for job in listed {
        if let Some(seconds) = ran.get(&job.key).or_else(|| old.get(&job.key)) {
            kept.insert(job.key.clone(), *seconds);
        }
    }
    kept
}

/// The binary part of a `binary key::test name` key.
fn binary_of(key: &str) -> &str {
    key.split_once("::").map_or(key, |(binary, _)| binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(key: &str, integration: bool) -> Job {
        Job {
            binary: 0,
            name: key.into(),
            key: key.into(),
            integration,
            serial: false,
        }
    }

    #[test]
    fn a_serial_job_waits_for_the_running_one_and_others_go_ahead() {
        let serial = |key: &str| Job {
            serial: true,
            ..job(key, true)
        };
        let pending = [
            serial("e2e/aws"),
            serial("e2e/dvp"),
            job("csi/sanity", true),
        ];
        assert_eq!(next(&pending, false), Some(0));
        assert_eq!(next(&pending, true), Some(2));
        assert_eq!(next(&pending[..2], true), None);
        assert_eq!(next(&[], false), None);
    }

    #[test]
    fn slowest_first_then_unknown_integration_then_fast() {
        let timings = Timings::from([
            ("slow".to_string(), 120.0),
            ("fast".to_string(), 0.1),
            ("medium".to_string(), 10.0),
        ]);
        let jobs = vec![
            job("fast", true),
            job("new-unit", false),
            job("medium", true),
            job("new-integration", true),
            job("slow", true),
        ];
        let keys: Vec<_> = order(jobs, &timings).into_iter().map(|j| j.key).collect();
        assert_eq!(
            keys,
            ["slow", "new-integration", "medium", "new-unit", "fast"]
        );
    }

    #[test]
    fn merged_forgets_vanished_tests_of_listed_binaries_only() {
        let old = Timings::from([
            ("a/test/x::kept".to_string(), 1.0),
            ("a/test/x::gone".to_string(), 5.0),
            ("b/test/y::other".to_string(), 7.0),
        ]);
        let ran = Timings::from([("a/test/x::new".to_string(), 2.0)]);
        let listed = [
            job("a/test/x::kept", true),
            job("a/test/x::new", true),
            job("a/test/x::never-timed", true),
        ];
        assert_eq!(
            merged(&old, &ran, &listed),
            Timings::from([
                ("a/test/x::kept".to_string(), 1.0),
                ("a/test/x::new".to_string(), 2.0),
                ("b/test/y::other".to_string(), 7.0),
            ])
        );
    }
}
