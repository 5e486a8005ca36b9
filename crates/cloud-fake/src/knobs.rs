//! What a test sets to make the fake misbehave, and the log of what was asked.

use std::sync::Mutex;
use std::time::Duration;

use stratus_cloud::CloudError;

/// One call to the fake: the capability method and its main argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `instance_metadata`, `ensure`, `create_route`…
    pub method: &'static str,
    /// Node name, `namespace/name` of a Service, `table destination`…
    pub subject: String,
}

/// How one capability misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Knob {
    /// Every call waits this long first.
    pub delay: Duration,
    /// Every call fails with this error (a clone), until cleared.
    pub fail: Option<CloudError>,
}

/// Knobs and the call log, shared by the capabilities of one fake.
#[derive(Debug, Default)]
pub struct Controls {
    knobs: Mutex<std::collections::HashMap<&'static str, Knob>>,
    calls: Mutex<Vec<Call>>,
}

impl Controls {
    /// Sets the knob of a capability (`instances`, `load_balancer`, `routes`).
    pub fn set(&self, capability: &'static str, knob: Knob) {
        self.knobs.lock().expect("knobs").insert(capability, knob);
    }

    /// Records a call and applies the capability's knob: waits, then fails or goes on.
    pub async fn enter(
        &self,
        capability: &'static str,
        method: &'static str,
        subject: impl Into<String>,
    ) -> Result<(), CloudError> {
        self.calls.lock().expect("calls").push(Call {
            method,
            subject: subject.into(),
        });
        let knob = self
            .knobs
            .lock()
            .expect("knobs")
            .get(capability)
            .cloned()
            .unwrap_or_default();
        if !knob.delay.is_zero() {
            tokio::time::sleep(knob.delay).await;
        }
        match knob.fail {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("calls").clone()
    }

    /// How many calls of `method` were made.
    pub fn count(&self, method: &str) -> usize {
        self.calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|c| c.method == method)
            .count()
    }
}
