//! A real forward proxy for the proxy tests: proxy.py (pinned, from PyPI, in a venv of its own
//! under the cache), started per test on a free 127.0.0.1 port. It serves CONNECT tunnels and
//! absolute-form plain-HTTP requests, optionally demands basic credentials, and writes one
//! access-log line per request it handled, which [`ConnectProxy::requests`] reads back so a test
//! can assert that traffic really went through it. Tests only point it at 127.0.0.1 targets.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::time::Instant;

use crate::core::process::{Lifetime, Proc};
use crate::core::util::{free_listeners, random_token};
use crate::tools::install::{run_logged, Paths};
use crate::tools::{lock, progress, stamp_matches};

/// The pip requirement installed.
pub const REQUIREMENT: &str = "proxy.py==2.4.10";

/// The venv holding proxy.py.
fn venv(paths: &Paths) -> PathBuf {
    paths.cache.join("proxy-venv")
}

/// proxy.py's entry point.
pub fn binary(paths: &Paths) -> PathBuf {
    venv(paths).join("bin/proxy")
}

/// Installs proxy.py unless its stamp records [`REQUIREMENT`]. Blocking; serialised by the
/// `proxy-py` lock.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let stamp = venv(&paths).join(".stratus-stamp");
    let value = format!("{REQUIREMENT}\n");
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "proxy-py")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    progress(&format!("installing {REQUIREMENT} (first time only)"));
    let python = venv(&paths).join("bin/python");
    if !python.is_file() {
        let system = std::env::var_os("STRATUS_PYTHON").unwrap_or_else(|| "python3".into());
        let mut cmd = Command::new(system);
        cmd.args(["-m", "venv"]).arg(venv(&paths));
        run_logged(cmd, &paths.install_log, "python3 -m venv (proxy.py)")?;
    }
    let mut cmd = Command::new(&python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        REQUIREMENT,
    ]);
    run_logged(
        cmd,
        &paths.install_log,
        &format!("pip install {REQUIREMENT}"),
    )?;
    if !out.is_file() {
        bail!(
            "pip install {REQUIREMENT} succeeded but {} is missing",
            out.display()
        );
    }
    fs::write(&stamp, value).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(out)
}

/// One request the proxy handled: `CONNECT 127.0.0.1:6443`, or `GET 127.0.0.1:5000/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// The method (`CONNECT` for a tunnel).
    pub method: String,
    /// `host:port` for a tunnel, `host:port/path` for a forwarded request.
    pub target: String,
    /// The rest of the log line (status, bytes).
    pub outcome: String,
}

/// A running proxy.py, stopped on drop.
pub struct ConnectProxy {
    _proc: Proc,
    dir: PathBuf,
    port: u16,
    credentials: Option<(String, String)>,
}

impl ConnectProxy {
    /// Starts a proxy open to any client of 127.0.0.1.
    pub async fn start() -> Result<ConnectProxy> {
        ConnectProxy::launch(None).await
    }

    /// Starts a proxy that answers 407 unless the client sends `user:password` (basic).
    pub async fn start_with_credentials(user: &str, password: &str) -> Result<ConnectProxy> {
        ConnectProxy::launch(Some((user.into(), password.into()))).await
    }

    async fn launch(credentials: Option<(String, String)>) -> Result<ConnectProxy> {
        let binary = tokio::task::spawn_blocking(ensure_installed)
            .await
            .context("install task panicked")??;
        let dir = std::env::temp_dir().join(format!("stratus-proxy-{}", &random_token()?[..10]));
        fs::create_dir_all(&dir)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_listeners(1)?[0].local_addr()?.port();
            let mut args: Vec<String> = [
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--num-workers",
                "1",
                "--num-acceptors",
                "1",
                // A request is logged when its connection closes: idle ones close soon, so a
                // test sees pooled connections' requests within seconds (a longer quiet tunnel
                // is cut too, and the client reconnects).
                "--timeout",
                "3",
                "--log-file",
                &dir.join("access.log").display().to_string(),
            ]
            .map(String::from)
            .to_vec();
            if let Some((user, password)) = &credentials {
                args.extend(["--basic-auth".into(), format!("{user}:{password}")]);
            }
            let mut proc = Proc::spawn(
                "proxy.py",
                &binary,
                args.into_iter().map(Into::into).collect(),
                dir.join("proxy.log"),
                Lifetime::Attached,
            )?;
            let ready = proc
                .wait_ready(Duration::from_secs(20), || async move {
                    tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .map(drop)
                        .map_err(Into::into)
                })
                .await;
            match ready {
                Ok(()) => {
                    return Ok(ConnectProxy {
                        _proc: proc,
                        dir,
                        port,
                        credentials,
                    })
                }
                Err(e) if attempt < 3 => {
                    eprintln!("stratus-testenv: proxy.py start failed, retrying: {e:#}")
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `http://127.0.0.1:PORT`, with the credentials when it demands them: the value for
    /// `HTTPS_PROXY` / `HTTP_PROXY`.
    pub fn url(&self) -> String {
        match &self.credentials {
            Some((user, password)) => format!("http://{user}:{password}@127.0.0.1:{}", self.port),
            None => format!("http://127.0.0.1:{}", self.port),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The requests it has handled so far, from its access log (oldest first).
    pub fn requests(&self) -> Vec<ProxiedRequest> {
        let log = fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        log.lines().filter_map(parse_access_line).collect()
    }

    /// Waits until a handled request satisfies `pred` (the access log is written a moment after
    /// the request ends), failing after `timeout` with what it did see.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&ProxiedRequest) -> bool,
    ) -> Result<ProxiedRequest> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.requests();
            if let Some(found) = seen.iter().find(|r| pred(r)) {
                return Ok(found.clone());
            }
            if Instant::now() >= deadline {
                bail!("the proxy saw no {what} within {timeout:?}; it saw {seen:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// `... server.access_log:393 - 127.0.0.1:59640 - GET 127.0.0.1:18765/ - 200 OK - 11 bytes - 8.01ms`
/// → `GET`, `127.0.0.1:18765/`, `200 OK - 11 bytes - 8.01ms`.
fn parse_access_line(line: &str) -> Option<ProxiedRequest> {
    let (_, rest) = line.split_once("access_log:")?;
    let mut fields = rest.splitn(4, " - ");
    let _position = fields.next()?;
    let _client = fields.next()?;
    let (method, target) = fields.next()?.split_once(' ')?;
    Some(ProxiedRequest {
        method: method.into(),
        target: target.into(),
        outcome: fields.next().unwrap_or_default().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_parse() {
        let got = parse_access_line("2026-11-28 01:56:36,007 - pid:9268 [I] server.access_log:393 - 127.0.0.1:59654 - CONNECT 127.0.0.1:18765 - 454 bytes - 3.04ms").unwrap();
        assert_eq!(got.method, "CONNECT");
        assert_eq!(got.target, "127.0.0.1:18765");
        assert_eq!(got.outcome, "454 bytes - 3.04ms");
        let got = parse_access_line(
            "x server.access_log:393 - 127.0.0.1:1 - GET 127.0.0.1:5/a?b - 200 OK - 1 bytes - 1ms",
        )
        .unwrap();
        assert_eq!(
            (got.method.as_str(), got.target.as_str()),
            ("GET", "127.0.0.1:5/a?b")
        );
        assert!(parse_access_line("x plugins.load:89 - Loaded plugin").is_none());
    }
}
