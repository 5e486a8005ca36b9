//! Waiting for a condition (polling), never sleeping in its place.

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// Polls `check` every 100 ms until it yields `Some`, or fails after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            let detail = last_error
                .map(|e| format!(" (last error: {e:#})"))
                .unwrap_or_default();
            anyhow::bail!("timed out after {timeout:?} waiting for {what}{detail}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
