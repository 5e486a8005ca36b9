//! `make bench-ecr`: end-to-end latency and peak RSS of the `ecr-credential-provider` binary, as
//! the kubelet runs it (a new process, the request on stdin, the answer read from stdout),
//! against moto behind the counting proxy. Three phases of `--runs` invocations each: cold with
//! the node's credentials (empty cache: one ECR call), cold with a service-account token (STS
//! then ECR), and cached (no AWS call, checked at the proxy). Each child's peak RSS comes from
//! `wait4`. Prints JSON.
// Unsafe code in this file: wait4 reports the child's peak RSS (no safe wrapper in std).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::json;
use stratus_scenarios::ccm::sibling_binary;
use stratus_testenv::AwsEnv;

const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ROLE: &str = "arn:aws:iam::111122223333:role/ecr-pull";

#[derive(Parser)]
struct Args {
    /// Invocations per phase.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// The plugin binary (default: next to this one).
    #[arg(long)]
    binary: Option<PathBuf>,
}

/// One finished invocation.
struct Sample {
    millis: f64,
    max_rss_kib: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.runs > 0, "--runs must be positive");
    let binary = match args.binary {
        Some(path) => path,
        None => sibling_binary("ecr-credential-provider")?,
    };
    let aws = AwsEnv::start().await?;
    aws.set_ecr_token_lifetime(Some(Duration::from_secs(12 * 3600)))
        .await?;
    let mut env = aws.env_vars();
    env.push(("AWS_CONFIG_FILE".into(), "/dev/null".into()));
    env.push(("AWS_SHARED_CREDENTIALS_FILE".into(), "/dev/null".into()));
    let dirs = aws.dir().join("bench");
    let node_request = request(None);
    let role_request = request(Some(&sa_token()));

    // Page the binary in once, as a node that has pulled images before would have.
    invoke(&binary, &env, &["--version".to_owned()], b"")?;

    let mut phases = serde_json::Map::new();
    for (phase, stdin, requests_per_run) in [
        ("cold", &node_request, 1),
        ("cold_service_account", &role_request, 2),
        ("cached", &node_request, 0),
    ] {
        let cached_dir = dirs.join("cached");
        // Untimed: primes the entry the cached phase reads, and has moto load its ECR and STS
        // backends (done on first use) before anything is timed.
        let warm_up = if phase == "cached" {
            cached_dir.clone()
        } else {
            dirs.join(format!("{phase}-warm-up"))
        };
        run_checked(&binary, &env, &warm_up, stdin)?;
        eprintln!("{phase}: {} invocations", args.runs);
        aws.reset_aws_request_counts().await?;
        let mut samples = Vec::with_capacity(args.runs);
        for n in 0..args.runs {
            let dir = if phase == "cached" {
                cached_dir.clone()
            } else {
                dirs.join(format!("{phase}-{n}"))
            };
            samples.push(run_checked(&binary, &env, &dir, stdin)?);
        }
        let counts = aws.aws_request_counts().await?;
        let total: u64 = counts.values().sum();
        if total != requests_per_run * args.runs as u64 {
            bail!(
                "{phase}: expected {requests_per_run} AWS requests per run, saw {counts:?} for {} runs",
                args.runs
            );
        }
        phases.insert(phase.to_owned(), summary(&samples, &counts, args.runs));
    }

    let report = json!({
        "benchmark": "bench-ecr",
        "runs_per_phase": args.runs,
        "binary_bytes": std::fs::metadata(&binary)?.len(),
        "cached_target_ms": 5.0,
        "cached_p95_under_target": phases["cached"]["latency_ms_p95"].as_f64().is_some_and(|p| p < 5.0),
        "phases": phases,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn summary(samples: &[Sample], counts: &BTreeMap<String, u64>, runs: usize) -> serde_json::Value {
    let mut millis: Vec<f64> = samples.iter().map(|s| s.millis).collect();
    millis.sort_by(f64::total_cmp);
    let mut rss: Vec<f64> = samples
        .iter()
        .map(|s| s.max_rss_kib as f64 / 1024.0)
        .collect();
    rss.sort_by(f64::total_cmp);
    let total: u64 = counts.values().sum();
    json!({
        "latency_ms_p50": r2(quantile(&millis, 0.5)),
        "latency_ms_p95": r2(quantile(&millis, 0.95)),
        "latency_ms_max": r2(*millis.last().unwrap_or(&0.0)),
        "latency_ms_mean": r2(millis.iter().sum::<f64>() / millis.len().max(1) as f64),
        "peak_rss_mib_p50": r2(quantile(&rss, 0.5)),
        "peak_rss_mib_max": r2(*rss.last().unwrap_or(&0.0)),
        "aws_requests_per_run": r2(total as f64 / runs as f64),
        "aws_requests_by_action": counts,
    })
}

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn request(token: Option<&str>) -> Vec<u8> {
    let mut request = json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": format!("{HOST}/team/app:v1"),
    });
    if let Some(token) = token {
        request["serviceAccountToken"] = token.into();
        request["serviceAccountAnnotations"] = json!({ "eks.amazonaws.com/ecr-role-arn": ROLE });
    }
    request.to_string().into_bytes()
}

/// An unsigned token shaped like the kubelet's (moto does not verify it).
fn sa_token() -> String {
    // {"alg":"RS256"} . {"sub":"system:serviceaccount:bench:puller","aud":["sts.amazonaws.com"]}
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YmVuY2g6cHVsbGVyIiwiYXVkIjpbInN0cy5hbWF6b25hd3MuY29tIl19.c2lnbmF0dXJl".to_owned()
}

/// Runs the plugin with `--cache-dir=dir` and checks it answered.
fn run_checked(
    binary: &Path,
    env: &[(String, String)],
    dir: &Path,
    stdin: &[u8],
) -> anyhow::Result<Sample> {
    let args = [format!("--cache-dir={}", dir.display())];
    let (sample, stdout, stderr) = invoke(binary, env, &args, stdin)?;
    if !stdout.contains(HOST) || !stdout.contains("auth-token") {
        bail!("unexpected answer:\nstdout: {stdout}\nstderr: {stderr}");
    }
    Ok(sample)
}

/// Spawns the plugin, writes `stdin`, reads stdout and stderr to the end and reaps it with
/// `wait4`, which also yields its peak RSS. Times spawn to reap.
fn invoke(
    binary: &Path,
    env: &[(String, String)],
    args: &[String],
    stdin: &[u8],
) -> anyhow::Result<(Sample, String, String)> {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(stdin)
        .context("writing stdin")?;
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .context("stdout")?
        .read_to_string(&mut stdout)?;
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .context("stderr")?
        .read_to_string(&mut stderr)?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain syscall on our own child, with valid out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    anyhow::ensure!(reaped == pid, "wait4: {}", std::io::Error::last_os_error());
    let status = std::process::ExitStatus::from_raw(status);
    if !status.success() {
        bail!("{} {args:?} failed ({status}): {stderr}", binary.display());
    }
    Ok((
        Sample {
            millis: elapsed.as_secs_f64() * 1000.0,
            max_rss_kib: usage.ru_maxrss as u64,
        },
        stdout,
        stderr,
    ))
}
