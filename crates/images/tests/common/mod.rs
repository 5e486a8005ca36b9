//! Shared by the image tests: package a debug binary through `stratus-images`, have crane (a
//! real registry, `push`, `validate`, `config`, `export`) judge and flatten the image, unpack
//! it and run its binary with `chroot` as the non-root user.
#![allow(dead_code)]

pub mod storage;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use stratus_images::artifact::{self, Artifact, Sources};
use stratus_images::rootfs::NONROOT_UID;
use stratus_images::table::Binary;
use stratus_runtime::build_info::BUILD;

/// The build machine's CA bundle, as `make images` copies it.
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Packages the debug build of `binary` (next to this test) into `out`.
pub fn package(binary: &Binary, out: &Path) -> Result<Artifact> {
    let path = stratus_scenarios::ccm::sibling_binary(binary.name)?;
    artifact::package(
        binary,
        &Sources {
            binary: &path,
            ca_bundle: Path::new(CA_BUNDLE),
            build: &BUILD,
        },
        out,
    )
}

/// Fails unless the test runs as root (`chroot` needs it).
pub fn require_root() {
    // SAFETY-free check: the effective user of this process, as `id -u` reports it.
    let out = Command::new("id").arg("-u").output().expect("id -u");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "the image tests run binaries with chroot, which needs root"
    );
}

/// `crane registry serve` on a free port; killed on drop.
pub struct Registry {
    child: Child,
    crane: PathBuf,
    /// `localhost:<port>`.
    pub host: String,
}

impl Registry {
    /// Starts the registry and waits for its `serving on port N` line.
    pub fn start(crane: &Path) -> Result<Registry> {
        let mut child = Command::new(crane)
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting crane registry serve")?;
        let mut lines = BufReader::new(child.stderr.take().context("stderr")?).lines();
        let port = loop {
            let Some(line) = lines.next() else {
                bail!("crane registry serve exited before serving");
            };
            let line = line?;
            if let Some(port) = line.split("serving on port ").nth(1) {
                break port.trim().to_owned();
            }
        };
        // Keep draining its log so a full pipe never stalls it.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Registry {
            child,
            crane: crane.to_owned(),
            host: format!("127.0.0.1:{port}"),
        })
    }

    /// Runs crane with `args`; fails with its output unless it succeeds.
    pub fn crane(&self, args: &[&str]) -> Result<Vec<u8>> {
        let out = Command::new(&self.crane)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running crane {args:?}"))?;
        if !out.status.success() {
            bail!(
                "crane {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(out.stdout)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An image as crane saw it, unpacked.
pub struct Unpacked {
    /// The image's config (crane config).
    pub config: Value,
    /// The root file system.
    pub root: PathBuf,
}

/// Opens the `oci-archive` in `work`, pushes its layout to the registry, validates every
/// digest, reads the config and exports the flattened file system into `work/root`.
pub fn unpack(registry: &Registry, a: &Artifact, out: &Path, work: &Path) -> Result<Unpacked> {
    let layout = work.join("layout");
    let root = work.join("root");
    std::fs::create_dir_all(&layout)?;
    std::fs::create_dir_all(&root)?;
    tar(&[
        "-xf",
        &out.join(&a.file).to_string_lossy(),
        "-C",
        &layout.to_string_lossy(),
    ])?;
    let reference = format!("{}/{}:{}", registry.host, a.name, a.tag);
    let pushed = registry.crane(&["push", &layout.to_string_lossy(), &reference])?;
    let pushed = String::from_utf8_lossy(&pushed);
    assert!(
        pushed.trim().ends_with(&a.digest),
        "crane pushed {pushed}, the manifest says {}",
        a.digest
    );
    registry.crane(&["validate", "--remote", &reference])?;
    let config = serde_json::from_slice(&registry.crane(&["config", &reference])?)?;
    let fs_tar = work.join("fs.tar");
    registry.crane(&["export", &reference, &fs_tar.to_string_lossy()])?;
    tar(&[
        "-xpf",
        &fs_tar.to_string_lossy(),
        "--same-owner",
        "--numeric-owner",
        "-C",
        &root.to_string_lossy(),
    ])?;
    Ok(Unpacked { config, root })
}

/// Runs the system tar.
pub fn tar(args: &[&str]) -> Result<()> {
    let out = Command::new("tar")
        .args(args)
        .output()
        .context("running tar")?;
    if !out.status.success() {
        bail!("tar {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A command running `program` (a path inside `root`) with `chroot` as the non-root user.
pub fn in_root(root: &Path, program: &str) -> Command {
    // Found on this process's PATH: the child's PATH (set below) is the image's.
    let mut cmd = Command::new(host_program("chroot"));
    cmd.arg(format!("--userspec={NONROOT_UID}:{NONROOT_UID}"))
        .arg(root)
        .arg(program)
        .env_clear()
        .env("PATH", stratus_images::oci::path());
    cmd
}

/// `name` as found on this process's `PATH`.
fn host_program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found on PATH"))
}

/// Runs `program args` in `root` as the non-root user and returns its output.
pub fn run_in(root: &Path, program: &str, args: &[&str]) -> Result<Output> {
    Ok(in_root(root, program)
        .args(args)
        .stdin(Stdio::null())
        .output()?)
}
