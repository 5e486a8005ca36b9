//! amazon-ec2-metadata-mock (AEMM), the real IMDS emulator: installed from its Go module at a
//! pinned version into the cache, and started per test on a free 127.0.0.1 port with the
//! scenario's subcommand and flags (`spot`, `events`, `asglifecycle`, `-I` for IMDSv2 only...).

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::core::process::{stop_all, Lifetime, Proc};
use crate::core::util::{free_listeners, random_token, HttpClient};
use crate::tools::install::{run_logged, Paths};

/// The Go module and version installed.
pub const MODULE: &str = "github.com/aws/amazon-ec2-metadata-mock";
/// The pinned version.
pub const VERSION: &str = "v1.13.0";

/// The installed binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.cache.join("bin/ec2-metadata-mock")
}

/// Installs AEMM into the cache unless the stamp records this version. Blocking; serialised
/// with the other installers by the cache's install lock.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let bin_dir = paths.cache.join("bin");
    fs::create_dir_all(&bin_dir)?;
    let out = binary(&paths);
    let stamp = bin_dir.join(".stamp-aemm");
    let stamp_value = format!("{MODULE}@{VERSION}\n");
    let current = || {
        out.is_file() && fs::read_to_string(&stamp).ok().as_deref() == Some(stamp_value.as_str())
    };
    if current() {
        return Ok(out);
    }
    let lock_path = paths.cache.join("install.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    if current() {
        return Ok(out);
    }
    // `go install module/cmd@version` builds outside any module; GOBIN is a private dir so a
    // running binary is replaced by a rename, never overwritten in place.
    let gobin = bin_dir.join(format!(".aemm-{}", std::process::id()));
    fs::create_dir_all(&gobin)?;
    let go = std::env::var_os("STRATUS_GO").unwrap_or_else(|| "go".into());
    let mut cmd = Command::new(go);
    cmd.env("GOBIN", &gobin)
        .env("CGO_ENABLED", "0")
        .args(["install", "-trimpath", "-ldflags", "-s -w"])
        .arg(format!("{MODULE}/cmd/ec2-metadata-mock@{VERSION}"));
    let result = run_logged(
        cmd,
        &paths.install_log,
        &format!("go install {MODULE}@{VERSION}"),
    );
    if result.is_ok() {
        fs::rename(gobin.join("ec2-metadata-mock"), &out)
            .with_context(|| format!("moving ec2-metadata-mock to {}", out.display()))?;
        fs::write(&stamp, stamp_value)?;
    }
    let _ = fs::remove_dir_all(&gobin);
    drop(lock);
    result.map(|()| out)
}

/// A running AEMM, stopped on drop.
pub struct Aemm {
    proc: Proc,
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    url: String,
}

impl Aemm {
    /// Starts `ec2-metadata-mock ARGS -n 127.0.0.1 -p PORT` (e.g. `["spot", "-t", TIME]`) and
    /// waits until it answers.
    pub async fn start(args: &[&str]) -> Result<Aemm> {
        let binary = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        let dir = std::env::temp_dir().join(format!("stratus-aemm-{}", &random_token()?[..10]));
        fs::create_dir_all(&dir)?;
        // AEMM reads $HOME/aemm-config.json unless given a config file; an empty one keeps the
        // flags alone in charge (a missing file is an error).
        fs::write(dir.join("aemm-config.json"), "{}")?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_listeners(1)?[0].local_addr()?.port();
            match launch(&binary, &dir, port, args).await {
                Ok(proc) => {
                    return Ok(Aemm {
                        proc,
                        binary,
                        dir,
                        port,
                        url: format!("http://127.0.0.1:{port}"),
                    })
                }
                Err(e) if attempt < 3 => {
                    eprintln!("stratus-testenv: AEMM start failed, retrying: {e:#}")
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Stops the mock and starts it again on the same port with other arguments (a scenario
    /// changing what the instance metadata says, e.g. an event becoming `canceled`).
    pub async fn restart(&mut self, args: &[&str]) -> Result<()> {
        stop_all(&mut [&mut self.proc], Duration::from_secs(2));
        self.proc = launch(&self.binary, &self.dir, self.port, args).await?;
        Ok(())
    }

    /// `http://127.0.0.1:PORT`, for `--metadata-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// AEMM's log.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("aemm.log")).unwrap_or_default()
    }
}

/// Starts AEMM on `port` and waits until it answers.
async fn launch(binary: &Path, dir: &Path, port: u16, args: &[&str]) -> Result<Proc> {
    let mut argv: Vec<OsString> = args.iter().map(OsString::from).collect();
    argv.extend(
        [
            "-n".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-c".into(),
            dir.join("aemm-config.json").display().to_string(),
        ]
        .map(OsString::from),
    );
    let mut proc = Proc::spawn(
        "ec2-metadata-mock",
        binary,
        argv,
        dir.join("aemm.log"),
        Lifetime::Attached,
    )?;
    let probe = format!("http://127.0.0.1:{port}/latest/meta-data/instance-id");
    let http = HttpClient::new();
    proc.wait_ready(Duration::from_secs(20), || async {
        // Any answer (a 401 in IMDSv2-only mode too) means it serves.
        http.get(&probe).await.map(drop)
    })
    .await?;
    Ok(proc)
}

impl Drop for Aemm {
    fn drop(&mut self) {
        stop_all(&mut [&mut self.proc], Duration::from_secs(2));
        let _ = fs::remove_dir_all(&self.dir);
    }
}
