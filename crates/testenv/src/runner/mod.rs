//! `testenv test`: the workspace's tests, each in its own process, several at once across all test
//! binaries (`cargo test` runs the binaries one after another, so one slow suite held up the
//! rest). The longest tests of the last run start first; the run ends with the failures' output,
//! the slowest tests and a total, then the doc tests through cargo. A whole-workspace run removes
//! the test executables its build replaced.

pub mod artifacts;
pub mod exec;
pub mod plan;
pub mod prune;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use artifacts::TestBinary;
use plan::{Job, Timings};

/// What `testenv test` runs and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Tests running at once.
    pub jobs: usize,
    /// A test still running after this is killed and fails.
    pub timeout: Duration,
    /// Where the last run's timings live.
    pub timings: PathBuf,
    /// A test taking at least this long gets its own line when it ends.
    pub report_slower_than: Duration,
    /// Where each failure's output is written as soon as it fails (emptied at the start).
    pub failures_dir: PathBuf,
    /// Only these packages (`-p`); empty: the whole workspace.
    pub packages: Vec<String>,
}

impl Options {
    /// `--workspace`, or `-p NAME` per chosen package.
    fn selection(&self) -> Vec<String> {
        if self.packages.is_empty() {
            return vec!["--workspace".into()];
        }
        self.packages
            .iter()
            .flat_map(|p| ["-p".to_string(), p.clone()])
            .collect()
    }
}

/// Builds and runs every test; `Ok(false)` when any failed.
pub async fn run(options: &Options) -> Result<bool> {
    let started = Instant::now();
    let binaries = compile(&options.selection()).await?;
    if options.packages.is_empty() {
        let executables: Vec<PathBuf> = binaries.iter().map(|b| b.executable.clone()).collect();
        let (files, bytes) = prune::remove_stale(&executables);
        if files > 0 {
            println!(
                "test: removed {files} older test executables ({} MB)",
                bytes / 1_000_000
            );
        }
    }
    let jobs = list(&binaries).await?;
    let old = read_timings(&options.timings);
    let _ = std::fs::remove_dir_all(&options.failures_dir);
    let ordered = plan::order(jobs.clone(), &old);
    println!(
        "test: {} tests in {} binaries, {} at a time (listed after {} s)",
        ordered.len(),
        binaries.len(),
        options.jobs,
        started.elapsed().as_secs()
    );
    let (ran, failures) = execute(&binaries, ordered, options).await;
    let merged = plan::merged(&old, &ran, &jobs);
    if let Err(err) = write_timings(&options.timings, &merged) {
        eprintln!(
            "test: cannot keep the timings in {}: {err:#}",
            options.timings.display()
        );
    }
    let docs_passed = doc_tests(&options.selection()).await?;
    report(&ran, &failures, started);
    Ok(failures.is_empty() && docs_passed)
}

/// `cargo test --no-run` over the selection, its progress shown, its JSON messages read.
async fn compile(selection: &[String]) -> Result<Vec<TestBinary>> {
    use tokio::io::AsyncBufReadExt;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = tokio::process::Command::new(cargo)
        .arg("test")
        .args(selection)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("running cargo test --no-run")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut messages = String::new();
    // With JSON messages cargo prints no `Compiling` lines: one line per test binary built.
    while let Some(line) = lines.next_line().await? {
        if let Some(key) = artifacts::built_test_binary(&line) {
            println!("test: built {key}");
        }
        messages.push_str(&line);
        messages.push('\n');
    }
    if !child.wait().await?.success() {
        bail!("the tests do not compile (cargo test --no-run failed, see above)");
    }
    artifacts::test_binaries(&messages)
}

/// Every test of every binary, ignored ones left out.
async fn list(binaries: &[TestBinary]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for (index, binary) in binaries.iter().enumerate() {
        let all = listing(binary, false).await?;
        let ignored = listing(binary, true).await?;
        jobs.extend(
            all.into_iter()
                .filter(|name| !ignored.contains(name))
                .map(|name| Job {
                    binary: index,
                    key: format!("{}::{name}", binary.key),
                    name,
                    integration: binary.integration,
                    serial: binary.integration
                        && plan::SERIAL_PACKAGES.contains(&binary.package.as_str()),
                }),
        );
    }
    Ok(jobs)
}

async fn listing(binary: &TestBinary, ignored: bool) -> Result<Vec<String>> {
    let mut command = tokio::process::Command::new(&binary.executable);
    command.args(["--list", "--format", "terse"]);
    if ignored {
        command.arg("--ignored");
    }
    let out = command
        .current_dir(&binary.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("listing the tests of {}", binary.key))?;
    if !out.status.success() {
        bail!(
            "{} cannot list its tests: {}",
            binary.key,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(artifacts::test_names(&String::from_utf8_lossy(&out.stdout)))
}

/// A failed test: its key and output.
type Failure = (String, String);

/// Runs the jobs `options.jobs` at a time, printing slow and failed tests as they end and a
/// progress line every minute.
async fn execute(
    binaries: &[TestBinary],
    jobs: Vec<Job>,
    options: &Options,
) -> (Timings, Vec<Failure>) {
    let total = jobs.len();
    let started = Instant::now();
    let slots = Arc::new(Semaphore::new(options.jobs.max(1)));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    // One dispatcher takes a slot, then starts the next job that may start (planned order; one
    // real-cluster job at a time).
    let binaries = binaries.to_vec();
    let timeout = options.timeout;
    let serial_running = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let serial_ended = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(async move {
        let mut pending = jobs;
        while !pending.is_empty() {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let running = serial_running.load(std::sync::atomic::Ordering::SeqCst);
            let Some(index) = plan::next(&pending, running) else {
                drop(slot);
                serial_ended.notified().await;
                continue;
            };
            let job = pending.remove(index);
            if job.serial {
                serial_running.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let binary = binaries[job.binary].clone();
            let done = done_tx.clone();
            let (serial_running, serial_ended) = (serial_running.clone(), serial_ended.clone());
            tokio::spawn(async move {
                let outcome = exec::run_one(&binary, &job.name, timeout).await;
                drop(slot);
                if job.serial {
                    serial_running.store(false, std::sync::atomic::Ordering::SeqCst);
                    // A permit is kept when the dispatcher is not waiting yet.
                    serial_ended.notify_one();
                }
                let _ = done.send((job.key, outcome));
            });
        }
    });
    let mut ran = Timings::new();
    let mut failures = Vec::new();
    let mut progress = tokio::time::interval(Duration::from_secs(60));
    progress.tick().await;
    loop {
        tokio::select! {
            ended = done_rx.recv() => {
                let Some((key, outcome)) = ended else { break };
                if !outcome.passed {
                    let saved = save_failure(&options.failures_dir, &key, &outcome.output);
                    println!("  FAILED {:>7.1} s  {key}  (output: {saved})", outcome.seconds);
                    failures.push((key.clone(), outcome.output));
                } else if outcome.seconds >= options.report_slower_than.as_secs_f64() {
                    println!("  ok     {:>7.1} s  {key}", outcome.seconds);
                }
                ran.insert(key, outcome.seconds);
            }
            _ = progress.tick() => {
                println!(
                    "test: {}/{total} done, {} failed, {} s",
                    ran.len(),
                    failures.len(),
                    started.elapsed().as_secs()
                );
            }
        }
        let _ = std::io::stdout().flush();
    }
    (ran, failures)
}

/// Writes a failed test's output to `dir/<key>.log` (path separators replaced); the path, or why
/// it could not be written.
fn save_failure(dir: &Path, key: &str, output: &str) -> String {
    let file = dir.join(format!("{}.log", key.replace(['/', ':'], "_")));
    match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&file, output)) {
        Ok(()) => file.display().to_string(),
        Err(err) => format!("not saved: {err}"),
    }
}

/// `cargo test --doc` over the selection, its output shown.
async fn doc_tests(selection: &[String]) -> Result<bool> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("test: doc tests");
    let status = tokio::process::Command::new(cargo)
        .arg("test")
        .args(selection)
        .args(["--doc", "-q"])
        .stdin(Stdio::null())
        .status()
        .await
        .context("running cargo test --doc")?;
    Ok(status.success())
}

fn report(ran: &Timings, failures: &[Failure], started: Instant) {
    for (key, output) in failures {
        println!("\n---- {key} ----\n{}", output.trim_end());
    }
    let mut slowest: Vec<_> = ran.iter().collect();
    slowest.sort_by(|a, b| b.1.total_cmp(a.1));
    println!("\ntest: slowest tests");
    for (key, seconds) in slowest.iter().take(10) {
        println!("  {seconds:>7.1} s  {key}");
    }
    if !failures.is_empty() {
        println!("\ntest: failed:");
        for (key, _) in failures {
            println!("  {key}");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; finished in {} s",
        if failures.is_empty() { "ok" } else { "FAILED" },
        ran.len() - failures.len(),
        failures.len(),
        started.elapsed().as_secs()
    );
}

fn read_timings(path: &Path) -> Timings {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn write_timings(path: &Path, timings: &Timings) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(timings)?)?;
    Ok(())
}
