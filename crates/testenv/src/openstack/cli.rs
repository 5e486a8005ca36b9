//! The OpenStack side of the `testenv` command line: `up --cloud openstack` (a cluster and the
//! OpenStack cloud, detached, with an env file carrying the `OS_*` variables and the path of a
//! ready `cloud.conf`) and the hidden `openstack-sim` subcommand that runs the simulators as
//! their own process.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::core::cluster::{Identity, KubeCluster};
use crate::core::process::Launch;
use crate::openstack::env::{OpenStackEnv, OpenStackOptions, SimSettings};

/// Starts a cluster and the OpenStack cloud detached in `dir`; writes `dir/pids` and `dir/env`.
pub(crate) async fn up(dir: &Path, shell_quote: fn(&str) -> String) -> Result<()> {
    let started = Instant::now();
    let proxy_exe = std::env::current_exe().context("locating the testenv binary")?;
    let launch = Launch::Detached { proxy_exe };
    let options = OpenStackOptions::default();
    let (cluster, cloud) = tokio::try_join!(
        KubeCluster::launch(dir, launch.lifetime()),
        OpenStackEnv::launch(dir, &launch, &options)
    )?;
    let mut pids = String::new();
    for (name, pid) in cluster.pids().into_iter().chain(cloud.pids()) {
        writeln!(pids, "{name} {pid}")?;
    }
    std::fs::write(dir.join("pids"), pids)?;

    let env_file = dir.join("env");
    let mut exports = format!(
        "# Written by `testenv up --cloud openstack`; load with: . {}\n",
        env_file.display()
    );
    let mut vars = vec![
        (
            "KUBECONFIG".to_owned(),
            cluster.kubeconfig(Identity::Admin).display().to_string(),
        ),
        (
            "STRATUS_CCM_KUBECONFIG".to_owned(),
            cluster
                .kubeconfig(Identity::CloudControllerManager)
                .display()
                .to_string(),
        ),
        (
            "STRATUS_APISERVER_URL".to_owned(),
            cluster.apiserver_url().to_owned(),
        ),
        (
            "STRATUS_OPENSTACK_ENDPOINT".to_owned(),
            cloud.endpoint().to_owned(),
        ),
        (
            "STRATUS_OPENSTACK_CLOUD_CONF".to_owned(),
            cloud.cloud_conf_path().display().to_string(),
        ),
    ];
    vars.extend(cloud.env_vars());
    for (key, value) in vars {
        writeln!(exports, "export {key}={}", shell_quote(&value))?;
    }
    std::fs::write(&env_file, exports)?;
    println!(
        "testenv: up in {:.1}s: apiserver {}, OpenStack {} (Keystone {}), cloud.conf {}",
        started.elapsed().as_secs_f64(),
        cluster.apiserver_url(),
        cloud.endpoint(),
        cloud.auth_url(),
        cloud.cloud_conf_path().display()
    );
    println!("testenv: environment file: {}", env_file.display());
    println!(
        "testenv: load it with `. {}`; stop with `testenv down --dir {}`",
        env_file.display(),
        dir.display()
    );
    cluster.release();
    cloud.release();
    Ok(())
}

/// Runs the simulators in the foreground (used by `up --cloud openstack`).
pub(crate) async fn run_sim(listen: SocketAddr, settings: &Path) -> Result<()> {
    let text =
        std::fs::read(settings).with_context(|| format!("reading {}", settings.display()))?;
    let settings: SimSettings =
        serde_json::from_slice(&text).with_context(|| format!("parsing {}", settings.display()))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    eprintln!("testenv openstack-sim: listening on {listen}");
    stratus_openstack_sim::serve(listener, settings.into_config())
        .await
        .context("serving the OpenStack simulators")
}
