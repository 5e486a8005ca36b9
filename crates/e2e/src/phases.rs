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

    /// The phases so far in their order and their total, as one line of JSON with two
    /// decimals (keys in phase order, which a JSON map would sort).
    pub fn to_json(&self) -> String {
        let total = self.done.iter().map(|(_, took)| *took).sum();
        let fields: Vec<String> = self
            .done
            .iter()
            .map(|(name, took)| (*name, *took))
            .chain([("total", total)])
            .map(|(name, took)| {
                let key = serde_json::Value::from(format!("{}_{name}_seconds", self.suite));
                format!("{key}: {:.2}", took.as_secs_f64())
            })
            .collect();
        format!("{{{}}}", fields.join(", "))
    }

    /// Prints [`Phases::to_json`].
    pub fn print(&self) {
        println!("{}", self.to_json());
    }
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
        let json = phases.to_json();
        assert_eq!(
            json,
            r#"{"os_cloud_seconds": 1.50, "os_cluster_seconds": 11.23, "os_ccm_seconds": 0.25, "os_total_seconds": 12.98}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed["os_total_seconds"], 12.98);
    }
}
