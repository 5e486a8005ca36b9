//! Runs one test of a test binary in its own process, as `cargo test` would run the binary: in the
//! package's directory with `CARGO_MANIFEST_DIR` set, its output captured, killed with everything
//! it started when it outlives the timeout.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::artifacts::TestBinary;

/// How one test ended.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status 0.
    pub passed: bool,
    /// Wall time.
    pub seconds: f64,
    /// stdout then stderr, kept for failures.
    pub output: String,
}

/// Runs `name` alone (`--exact`, one thread) and waits at most `timeout`.
pub async fn run_one(binary: &TestBinary, name: &str, timeout: Duration) -> Outcome {
    let started = Instant::now();
    let mut command = Command::new(&binary.executable);
    command
        .args([name, "--exact", "--test-threads", "1"])
        .current_dir(&binary.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout kills what the test started too.
        .process_group(0)
        .kill_on_drop(true);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return Outcome {
                passed: false,
                seconds: 0.0,
                output: format!("cannot start {}: {err}", binary.executable.display()),
            }
        }
    };
    let pid = child.id();
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Outcome {
            passed: out.status.success(),
            seconds: started.elapsed().as_secs_f64(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        },
        Ok(Err(err)) => Outcome {
            passed: false,
            seconds: started.elapsed().as_secs_f64(),
            output: format!("waiting for the test failed: {err}"),
        },
        Err(_) => {
            if let Some(pid) = pid {
                crate::core::process::signal_group(pid, libc::SIGKILL);
            }
            Outcome {
                passed: false,
                seconds: started.elapsed().as_secs_f64(),
                output: format!(
                    "timed out after {} s and was killed with its process group",
                    timeout.as_secs()
                ),
            }
        }
    }
}
