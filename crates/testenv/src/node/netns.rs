//! A private network namespace for one test: the calling thread leaves the host's network for a
//! fresh namespace holding only `lo` and a peerless interface carrying the node IP (with a
//! default route into it, so a packet for no local address is dropped there). This machine's
//! kernel has no `dummy` driver; an `ifb` device is its equivalent here: no peer, no wire. Every process the thread
//! (or a thread it starts) spawns afterwards lives in that namespace too, so nothing the test
//! serves or sends can leave it; the namespace disappears with the last process in it.
// unshare(2) has no safe wrapper in the crates we use.
#![allow(unsafe_code)]

use std::future::Future;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The node's IP inside the namespace (a private /24 of the dummy interface).
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 30, 1, 2);
/// The peerless (`ifb`) interface carrying [`NODE_IP`].
pub const NODE_INTERFACE: &str = "stratus-node";

/// Moves the calling thread into a new network namespace and sets up `lo` and the node
/// interface. Needs root (`CAP_SYS_ADMIN`, `CAP_NET_ADMIN`).
pub fn enter() -> Result<()> {
    if crate::core::process::spawner_started() {
        bail!("a child process was started before entering the private network namespace: its spawner thread would keep the host's network");
    }
    // SAFETY: unshare(2) with CLONE_NEWNET only changes the calling thread's network namespace;
    // it touches no memory of ours.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if rc != 0 {
        bail!(
            "unshare(CLONE_NEWNET) failed: {} (the real-cluster suites run as root)",
            std::io::Error::last_os_error()
        );
    }
    let address = format!("{NODE_IP}/24");
    for args in [
        &["link", "set", "lo", "up"][..],
        &["link", "add", NODE_INTERFACE, "type", "ifb"],
        &["addr", "add", &address, "dev", NODE_INTERFACE],
        &["link", "set", NODE_INTERFACE, "up"],
        &["route", "add", "default", "dev", NODE_INTERFACE],
    ] {
        ip(args)?;
    }
    Ok(())
}

/// Runs `test` on a multi-threaded Tokio runtime whose threads all live in a fresh private
/// network namespace (entered before the runtime starts, so every worker inherits it).
pub fn run<Fut: Future>(test: impl FnOnce() -> Fut) -> Fut::Output {
    enter().expect("entering a private network namespace");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building the test's runtime")
        .block_on(test())
}

/// The interfaces of the current network namespace (`ip -o link` names).
pub fn interfaces() -> Result<Vec<String>> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .stdin(Stdio::null())
        .output()
        .context("running ip -o link show")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
