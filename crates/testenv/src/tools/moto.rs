//! The moto AWS emulator, in a Python venv of the cache.

use std::fs;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools::install::{run_logged, Paths};

/// The moto requirement installed into the venv.
pub const MOTO_REQUIREMENT: &str = "moto[server]==5.2.1";

/// Installs moto into the venv unless the stamp says it is current.
pub(crate) fn ensure(paths: &Paths) -> Result<()> {
    let stamp = paths.venv.join(".stratus-stamp");
    let stamp_value = format!("{MOTO_REQUIREMENT}\n");
    if paths.moto_server.is_file()
        && fs::read_to_string(&stamp).ok().as_deref() == Some(stamp_value.as_str())
    {
        return Ok(());
    }

    let venv_python = paths.venv.join("bin/python");
    if !venv_python.is_file() {
        let python = std::env::var_os("STRATUS_PYTHON").unwrap_or_else(|| "python3".into());
        let mut cmd = Command::new(python);
        cmd.args(["-m", "venv"]).arg(&paths.venv);
        run_logged(cmd, &paths.install_log, "python3 -m venv")?;
    }
    let mut cmd = Command::new(&venv_python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        MOTO_REQUIREMENT,
    ]);
    run_logged(
        cmd,
        &paths.install_log,
        &format!("pip install {MOTO_REQUIREMENT}"),
    )?;
    if !paths.moto_server.is_file() {
        bail!(
            "pip install succeeded but {} is missing (see {})",
            paths.moto_server.display(),
            paths.install_log.display()
        );
    }
    fs::write(&stamp, stamp_value).with_context(|| format!("writing {}", stamp.display()))?;
    Ok(())
}
