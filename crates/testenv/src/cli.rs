//! The `testenv` command line: `install`, `up --dir DIR [--cloud aws|openstack]`, `down --dir
//! DIR` and the hidden `proxy` and `openstack-sim` subcommands that `up` uses to run the
//! counting proxy and the OpenStack simulators as their own processes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use crate::aws::TestEnv;
use crate::core::cluster::Identity;
use crate::core::process::Launch;
use crate::core::process::{alive, stop_detached};
use crate::tools::install::Paths;

#[derive(Parser)]
#[command(
    name = "testenv",
    about = "Stratus test environment: etcd + kube-apiserver + moto (AWS) behind a counting proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build kube-apiserver, kube-controller-manager, etcd and helm and install moto into the
    /// cache, and xfsprogs on the system when missing (idempotent).
    Install {
        /// Also every tool a suite builds on first use (Cluster API, csi-sanity, the CSI
        /// sidecars, Keystone, the virtualization CRDs, amazon-ec2-metadata-mock, crane,
        /// OpenTofu with its provider, machine-controller-manager), in the order the suites need them, each one's time
        /// printed; `make test` runs this in the background while Rust compiles.
        #[arg(long)]
        all: bool,
    },
    /// Build the workspace's tests and run them, each in its own process, JOBS at once across
    /// all test binaries, the slowest of the last run first; then the doc tests.
    Test {
        /// Tests running at once.
        #[arg(long, env = "STRATUS_TEST_JOBS", default_value_t = 4)]
        jobs: usize,
        /// A test still running after this many seconds is killed and fails.
        #[arg(long, default_value_t = 1200)]
        timeout_seconds: u64,
        /// A passing test taking at least this many seconds gets its own line.
        #[arg(long, default_value_t = 30)]
        report_slower_than: u64,
        /// Only this package's tests (repeatable); without it, the whole workspace.
        #[arg(short = 'p', long = "package")]
        packages: Vec<String>,
    },
    /// Start a detached environment with its files in DIR; prints the env file to source.
    Up {
        #[arg(long)]
        dir: PathBuf,
        /// The cloud beside the cluster: `aws` (moto) or `openstack` (Keystone + simulators).
        #[arg(long, default_value = "aws", value_parser = ["aws", "openstack"])]
        cloud: String,
    },
    /// Stop the environment that `up` started in DIR (idempotent).
    Down {
        #[arg(long)]
        dir: PathBuf,
    },
    /// Run the counting proxy in the foreground (used by `up`).
    #[command(hide = true)]
    Proxy {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        upstream: String,
        /// `aws` or `openstack`.
        #[arg(long, default_value = "aws", value_parser = ["aws", "openstack"])]
        protocol: String,
        /// Keystone (OpenStack protocol): where `/identity` goes.
        #[arg(long)]
        keystone_upstream: Option<String>,
    },
    /// Run the OpenStack simulators in the foreground (used by `up --cloud openstack`).
    #[command(hide = true)]
    OpenstackSim {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        settings: PathBuf,
    },
}

/// Entry point of the `testenv` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Install { all } => install(all),
        Command::Test {
            jobs,
            timeout_seconds,
            report_slower_than,
            packages,
        } => Paths::from_env().and_then(|paths| {
            let options = crate::runner::Options {
                jobs,
                timeout: Duration::from_secs(timeout_seconds),
                timings: paths.cache.join("test-timings.json"),
                failures_dir: paths.cache.join("test-failures"),
                report_slower_than: Duration::from_secs(report_slower_than),
                packages,
            };
            match runtime()?.block_on(crate::runner::run(&options))? {
                true => Ok(()),
                false => bail!("some tests failed (see above)"),
            }
        }),
        Command::Up { dir, cloud } if cloud == "openstack" => runtime().and_then(|rt| {
            rt.block_on(async {
                refuse_running(&dir)?;
                crate::openstack::cli::up(&dir, shell_quote).await
            })
        }),
        Command::Up { dir, .. } => runtime().and_then(|rt| rt.block_on(up(&dir))),
        Command::Down { dir } => down(&dir),
        Command::Proxy {
            listen,
            upstream,
            protocol,
            keystone_upstream,
        } => runtime()
            .and_then(|rt| rt.block_on(run_proxy(listen, upstream, &protocol, keystone_upstream))),
        Command::OpenstackSim { listen, settings } => {
            runtime().and_then(|rt| rt.block_on(crate::openstack::cli::run_sim(listen, &settings)))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("testenv: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn install(all: bool) -> Result<()> {
    let started = Instant::now();
    let paths = crate::ensure_installed()?;
    println!(
        "kube-controller-manager: {}",
        paths.kube_controller_manager().display()
    );
    println!("kube-apiserver: {}", paths.kube_apiserver.display());
    println!("etcd:           {}", paths.etcd.display());
    println!("helm:           {}", paths.helm.display());
    println!("moto_server:    {}", paths.moto_server.display());
    // A system package, not a cached tool: the CSI drivers' xfs tests need it.
    let mkfs_xfs = crate::tools::xfsprogs::ensure()?;
    println!("mkfs.xfs:       {}", mkfs_xfs.display());
    // The real cluster's container runtime, also from Debian.
    crate::tools::node_runtime::ensure()?;
    println!("containerd:     /usr/bin/containerd");
    println!("core tools ready after {} s", started.elapsed().as_secs());
    if all {
        install_on_demand_tools()?;
    }
    Ok(())
}

/// Every tool a suite builds on first use, in the order `cargo test` reaches the suites that need
/// them; each is skipped in a few `stat`s when current, and one that fails does not stop the others
/// (its suites then report the build's error themselves).
fn install_on_demand_tools() -> Result<()> {
    use crate::tools;
    type Step = (&'static str, fn() -> Result<()>);
    let steps: [Step; 12] = [
        ("cluster-api", || {
            tools::cluster_api::ensure_installed().map(drop)
        }),
        ("csi-sanity", || {
            tools::csi_sanity::ensure_installed().map(drop)
        }),
        ("csi-sidecars", || {
            tools::csi_sidecars::ensure_installed().map(drop)
        }),
        ("keystone", || tools::keystone::ensure_keystone().map(drop)),
        ("virtualization-crds", || {
            tools::virtualization_crds::ensure_virtualization_crds().map(drop)
        }),
        ("ec2-metadata-mock", || {
            tools::ec2_metadata_mock::ensure_installed().map(drop)
        }),
        ("crane", || tools::crane::ensure_installed().map(drop)),
        ("pause", || tools::pause::ensure_installed().map(drop)),
        ("opentofu", || tools::opentofu::ensure_opentofu().map(drop)),
        ("aws-schema-provider", || {
            tools::aws_schema::ensure_aws_schema_provider().map(drop)
        }),
        ("kubernetes-schema-provider", || {
            tools::kubernetes_schema::ensure_kubernetes_schema_provider().map(drop)
        }),
        ("machine-controller-manager", || {
            tools::machine_controller_manager::ensure_installed().map(drop)
        }),
    ];
    let mut failed = Vec::new();
    for (name, step) in steps {
        let started = Instant::now();
        match step() {
            Ok(()) => println!("{name}: ready after {} s", started.elapsed().as_secs()),
            Err(e) => {
                eprintln!(
                    "testenv: {name} failed after {} s: {e:#}",
                    started.elapsed().as_secs()
                );
                failed.push(name);
            }
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "tools that failed to build: {}",
        failed.join(", ")
    );
    Ok(())
}

/// Fails if an environment started by `up` still runs in `dir`.
fn refuse_running(dir: &Path) -> Result<()> {
    let pids_file = dir.join("pids");
    if read_pids(&pids_file)?.iter().any(|&(_, pid)| alive(pid)) {
        bail!(
            "an environment is already running in {} (see {}); run `testenv down --dir {}` first",
            dir.display(),
            pids_file.display(),
            dir.display()
        );
    }
    Ok(())
}

async fn up(dir: &Path) -> Result<()> {
    refuse_running(dir)?;
    let started = Instant::now();
    let proxy_exe = std::env::current_exe().context("locating the testenv binary")?;
    let env = TestEnv::launch(dir, Launch::Detached { proxy_exe }).await?;

    let mut pids = String::new();
    for (name, pid) in env.pids() {
        writeln!(pids, "{name} {pid}")?;
    }
    std::fs::write(env.dir().join("pids"), pids)?;

    let env_file = env.dir().join("env");
    let mut exports = format!(
        "# Written by `testenv up`; load with: . {}\n",
        env_file.display()
    );
    let mut vars = env.env_vars(Identity::Admin);
    vars.extend([
        (
            "STRATUS_CCM_KUBECONFIG".to_owned(),
            env.kubeconfig(Identity::CloudControllerManager)
                .display()
                .to_string(),
        ),
        (
            "STRATUS_APISERVER_URL".to_owned(),
            env.apiserver_url().to_owned(),
        ),
        (
            "STRATUS_MOTO_ENDPOINT".to_owned(),
            env.moto_endpoint().to_owned(),
        ),
    ]);
    for (key, value) in vars {
        writeln!(exports, "export {key}={}", shell_quote(&value))?;
    }
    std::fs::write(&env_file, exports)?;

    println!(
        "testenv: up in {:.1}s: apiserver {}, AWS proxy {}, moto {}",
        started.elapsed().as_secs_f64(),
        env.apiserver_url(),
        env.aws_endpoint(),
        env.moto_endpoint()
    );
    println!("testenv: environment file: {}", env_file.display());
    println!(
        "testenv: load it with `. {}`; stop with `testenv down --dir {}`",
        env_file.display(),
        env.dir().display()
    );
    env.release();
    Ok(())
}

fn down(dir: &Path) -> Result<()> {
    let pids_file = dir.join("pids");
    let procs = read_pids(&pids_file)?;
    let running: Vec<(String, u32)> = procs.into_iter().filter(|&(_, pid)| alive(pid)).collect();
    // etcd last, as in `TestEnv`'s drop: its graceful stop waits for the apiserver's watches.
    let (etcd, others): (Vec<_>, Vec<_>) = running.iter().partition(|(name, _)| name == "etcd");
    let pids =
        |procs: Vec<&(String, u32)>| procs.into_iter().map(|&(_, pid)| pid).collect::<Vec<_>>();
    stop_detached(&pids(others), Duration::from_secs(10));
    stop_detached(&pids(etcd), Duration::from_secs(10));
    for file in [&pids_file, &dir.join("env")] {
        match std::fs::remove_file(file) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(err).with_context(|| format!("removing {}", file.display()))
            }
            _ => {}
        }
    }
    if running.is_empty() {
        println!("testenv: nothing running in {}", dir.display());
    } else {
        println!(
            "testenv: stopped {} processes in {}",
            running.len(),
            dir.display()
        );
    }
    Ok(())
}

/// Reads `name pid` lines; a missing file means nothing was started.
fn read_pids(path: &Path) -> Result<Vec<(String, u32)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (name, pid) = line
                .split_once(' ')
                .with_context(|| format!("bad line {line:?} in {}", path.display()))?;
            let pid = pid
                .trim()
                .parse()
                .with_context(|| format!("bad pid in {line:?} in {}", path.display()))?;
            Ok((name.to_owned(), pid))
        })
        .collect()
}

async fn run_proxy(
    listen: SocketAddr,
    upstream: String,
    protocol: &str,
    keystone_upstream: Option<String>,
) -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    eprintln!("testenv proxy: listening on {listen}, forwarding to {upstream}");
    let protocol = match (protocol, keystone_upstream) {
        ("openstack", Some(keystone)) => crate::openstack::proxy::openstack(&keystone)?,
        ("openstack", None) => bail!("--protocol openstack needs --keystone-upstream"),
        _ => crate::aws::proxy::aws(),
    };
    crate::core::proxy::serve(
        listener,
        upstream,
        Arc::new(crate::core::proxy::Counters::new()),
        protocol,
    )
    .await
}

/// Single-quotes a value for POSIX shells.
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}
