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
/// did not run, none for tests that no longer exist in any binary it listed.
pub fn merged(old: &Timings, ran: &Timings, listed: &[Job]) -> Timings {
    listed
        .iter()
        .filter_map(|job| {
            let seconds = ran.get(&job.key).or_else(|| old.get(&job.key))?;
            Some((job.key.clone(), *seconds))
        })
        .collect()
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
        }
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
    fn merged_keeps_listed_tests_only() {
        let old = Timings::from([("a".to_string(), 1.0), ("gone".to_string(), 5.0)]);
        let ran = Timings::from([("b".to_string(), 2.0)]);
        let listed = [job("a", true), job("b", true), job("c", true)];
        assert_eq!(
            merged(&old, &ran, &listed),
            Timings::from([("a".to_string(), 1.0), ("b".to_string(), 2.0)])
        );
    }
}
