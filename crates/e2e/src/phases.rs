//! A suite's phase timings: each phase's duration since the previous mark, printed as one JSON
//! object (`{"<suite>_<phase>_seconds": …}`) the way the cluster's start time is, so a report
//! quotes generated numbers instead of typed ones.

use std::time::Duration;

use tokio::time::Instant;

/// Marks the end of each phase of a suite.
#[derive(Debug)]
pub struct Phases {
    suite: &'static str,
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    /// Starts timing the first phase of `suite` now.
    pub fn start(suite: &'static str) -> Phases {
        Phases {
            suite,
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now (the next one starts now).
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.record(name, now - self.last);
        self.last = now;
    }

    /// Records a phase measured elsewhere (e.g. the cluster's own start time); the next phase
    /// starts now.
    pub fn record(&mut self, name: &'static str, took: Duration) {
        self.done.push((name, took));
        self.last = Instant::now();
    }

    /// The phases so far and their total, as a JSON object with two decimals.
    pub fn to_json(&self) -> serde_json::Value {
        let key = |name: &str| format!("{}_{name}_seconds", self.suite);
        let mut object = serde_json::Map::new();
        for (name, took) in &self.done {
            object.insert(key(name), rounded(*took));
        }
        let total = self.done.iter().map(|(_, took)| *took).sum();
        object.insert(key("total"), rounded(total));
        serde_json::Value::Object(object)
    }

    /// Prints [`Phases::to_json`] on one line.
    pub fn print(&self) {
        println!("{}", self.to_json());
    }
}

fn rounded(took: Duration) -> serde_json::Value {
    serde_json::json!((took.as_secs_f64() * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn phases_are_timed_from_mark_to_mark_and_totalled() {
        let mut phases = Phases::start("os");
        tokio::time::advance(Duration::from_millis(1500)).await;
        phases.mark("cloud");
        phases.record("cluster", Duration::from_millis(11_234));
        tokio::time::advance(Duration::from_millis(250)).await;
        phases.mark("ccm");
        assert_eq!(
            phases.to_json(),
            serde_json::json!({
                "os_cloud_seconds": 1.5,
                "os_cluster_seconds": 11.23,
                "os_ccm_seconds": 0.25,
                "os_total_seconds": 12.98,
            })
        );
    }
}
