//! Child processes of the environment: spawning (attached or detached), readiness polling with
//! log tails in errors, and stopping whole process groups.
// Unsafe code in this file: pre-exec prctl/setsid and process-group signals through libc.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::future::Future;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

use anyhow::{bail, Context, Result};

use crate::core::util::log_tail;

/// How long a child may outlive the process that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Own process group, and SIGKILLed by the kernel if this process dies (even without running
    /// destructors, e.g. on Ctrl-C of `cargo test`).
    Attached,
    /// Own session (`setsid`): survives this process and its terminal.
    Detached,
}

/// How the processes relate to the caller.
pub(crate) enum Launch {
    /// Children of this process, killed on drop; the proxy runs in-process.
    Owned,
    /// Survive this process (`testenv up`); the proxy runs as `PROXY_EXE proxy ...`.
    Detached {
        /// The `testenv` executable.
        proxy_exe: PathBuf,
    },
}

impl Launch {
    pub(crate) fn lifetime(&self) -> Lifetime {
        match self {
            Launch::Owned => Lifetime::Attached,
            Launch::Detached { .. } => Lifetime::Detached,
        }
    }
}

/// One child process, restartable with the same command line. Dropping it stops the process
/// (unless [released](Proc::release)).
pub(crate) struct Proc {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    log: PathBuf,
    lifetime: Lifetime,
    child: Option<Child>,
}

impl Proc {
    /// Starts `program args` with stdin closed and stdout/stderr appended to `log`.
    pub(crate) fn spawn(
        name: &'static str,
        program: &Path,
        args: Vec<OsString>,
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Proc> {
        Proc::spawn_with_env(name, program, args, Vec::new(), log, lifetime)
    }

    /// [`Proc::spawn`] with these environment variables set on top of this process's.
    pub(crate) fn spawn_with_env(
        name: &'static str,
        program: &Path,
        args: Vec<OsString>,
        envs: Vec<(OsString, OsString)>,
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Proc> {
        let mut proc = Proc {
            name,
            program: program.to_path_buf(),
            args,
            envs,
            log,
            lifetime,
            child: None,
        };
        proc.start()?;
        Ok(proc)
    }

    /// (Re)starts the process with the original command line.
    pub(crate) fn start(&mut self) -> Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = match self.lifetime {
            Lifetime::Attached => {
                let parent = std::process::id();
                cmd.process_group(0);
                // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
                // syscalls (prctl, getppid).
                unsafe {
                    cmd.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                        // The parent may have died before prctl took effect.
                        if libc::getppid() as u32 != parent {
                            return Err(io::Error::other("parent exited"));
                        }
                        Ok(())
                    });
                }
                spawn_from_long_lived_thread(cmd)
            }
            Lifetime::Detached => {
                // SAFETY: setsid is async-signal-safe.
                unsafe {
                    cmd.pre_exec(|| {
                        if libc::setsid() < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                cmd.spawn()
            }
        }
        .with_context(|| format!("starting {} ({})", self.name, self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The pid, which is also the process group id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Fails (quoting the log) if the process has exited.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("{} is not running", self.name);
        };
        if let Some(status) = child.try_wait()? {
            bail!(
                "{} exited early ({status}); log {}:\n{}",
                self.name,
                self.log.display(),
                log_tail(&self.log, 40)
            );
        }
        Ok(())
    }

    /// Polls `probe` until it succeeds, failing early if the process exits and after `timeout`
    /// with the last probe error and the log tail.
    pub(crate) async fn wait_ready<F, Fut>(&mut self, timeout: Duration, mut probe: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let err = match probe().await {
                Ok(()) => return Ok(()),
                Err(err) => err,
            };
            self.check_running()?;
            if Instant::now() >= deadline {
                bail!(
                    "{} not ready after {timeout:?} (last probe: {err:#}); log {}:\n{}",
                    self.name,
                    self.log.display(),
                    log_tail(&self.log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends `signal` to the process group, unless the process was already reaped.
    fn signal(&mut self, signal: i32) {
        if let Some(child) = self.child.as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                // An unreaped child keeps its pid (= pgid) reserved, so this cannot hit a
                // recycled process.
                signal_group(child.id(), signal);
            }
        }
    }

    /// Forgets the child without stopping it (for detached environments).
    pub(crate) fn release(&mut self) {
        self.child = None;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        stop_all(&mut [self], Duration::from_secs(5));
    }
}

/// Stops processes: SIGTERM to every process group, then SIGKILL to those still running after
/// `grace`. Reaps them all.
pub(crate) fn stop_all(procs: &mut [&mut Proc], grace: Duration) {
    for proc in procs.iter_mut() {
        proc.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for proc in procs.iter_mut() {
        let Some(mut child) = proc.child.take() else {
            continue;
        };
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(child.try_wait(), Ok(None)) {
            tracing::warn!("{} did not stop within {grace:?}; killing it", proc.name);
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// Stops process groups by pid that are not our children (the `down` command): SIGTERM, wait
/// up to `grace` for them to disappear, then SIGKILL.
pub(crate) fn stop_detached(pids: &[u32], grace: Duration) {
    // `up` started each process as the leader of its own session and group; anything else is
    // a recycled pid and is left alone.
    let pids: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|&pid| {
            // SAFETY: plain syscall.
            i32::try_from(pid).is_ok_and(|pid| unsafe { libc::getpgid(pid) } == pid)
        })
        .collect();
    for &pid in &pids {
        signal_group(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &pid in &pids {
        if alive(pid) {
            signal_group(pid, libc::SIGKILL);
        }
    }
}

/// Whether a process with this pid exists and has not exited. Zombies count as exited: our
/// detached processes are reaped by init, which may take its time.
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence/permission.
    if unsafe { libc::kill(raw, 0) } != 0 {
        return false;
    }
    // /proc/PID/stat is "PID (COMM) STATE ..."; COMM may contain spaces and parentheses.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// Sends `signal` to the process group `pgid` (never to group 0 or 1).
pub(crate) fn signal_group(pgid: u32, signal: i32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        if pgid > 1 {
            // SAFETY: plain syscall; a negative pid addresses the process group.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

static SPAWNER: OnceLock<io::Result<mpsc::Sender<SpawnJob>>> = OnceLock::new();

/// Whether the spawner thread exists yet. Namespaces are per thread and a new thread inherits
/// its creator's: a test that moves into a private network namespace must do so before the
/// spawner starts, or its children would stay in the host's network.
pub(crate) fn spawner_started() -> bool {
    SPAWNER.get().is_some()
}

/// Spawns `cmd` from a thread that lives as long as this process. `PR_SET_PDEATHSIG` fires when
/// the *thread* that forked the child exits, so spawning from a tokio worker or a test thread
/// would kill children whenever that thread ends.
fn spawn_from_long_lived_thread(cmd: Command) -> io::Result<Child> {
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("stratus-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in queue {
                    let _ = reply.send(cmd.spawn());
                }
            })?;
        Ok(jobs)
    });
    let spawner = spawner
        .as_ref()
        .map_err(|err| io::Error::new(err.kind(), format!("spawner thread: {err}")))?;
    let (reply, answer) = mpsc::channel();
    spawner
        .send((cmd, reply))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Resident memory of a process and its children (uWSGI's master and workers), in bytes.
pub(crate) fn process_tree_rss(pid: u32) -> Option<u64> {
    let rss = |p: u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    let mut total = rss(pid)?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            total += rss(child).unwrap_or(0);
        }
    }
    Some(total)
}
