//! Running the real `tofu` binary: offline `init` with the given CLI config (providers from a
//! filesystem mirror only), `validate -json`, `test`, `fmt -check`, and `apply` + `output -json`
//! of provider-free modules on a local state. Every run has a deadline.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use serde::Deserialize;

/// How long one tofu command may take.
const DEADLINE: Duration = Duration::from_secs(300);

/// Why a tofu command failed.
#[derive(Debug, thiserror::Error)]
pub enum TofuError {
    #[error("could not run {what}: {source}")]
    /// tofu could not be started.
    Spawn {
        /// The command.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    #[error("{what} did not finish within {} s", DEADLINE.as_secs())]
    /// tofu did not finish in time.
    Deadline {
        /// The command.
        what: String,
    },
    #[error("{what} failed ({status}):\n{output}")]
    /// tofu exited unsuccessfully.
    Failed {
        /// The command.
        what: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        output: String,
    },
    #[error("{what}: unreadable output: {source}\n{output}")]
    /// tofu printed JSON that does not parse.
    Output {
        /// The command.
        what: String,
        /// Why.
        source: serde_json::Error,
        /// What it printed.
        output: String,
    },
}

/// The finished command: status and combined output.
#[derive(Debug, Clone)]
pub struct Run {
    /// Whether it exited 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// A `tofu` binary with its CLI config.
#[derive(Debug, Clone)]
pub struct Tofu {
    binary: PathBuf,
    cli_config: PathBuf,
    env: Vec<(String, String)>,
}

/// `tofu validate -json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Validation {
    /// Whether the configuration is valid.
    pub valid: bool,
    /// How many errors.
    pub error_count: u64,
    #[serde(default)]
    /// The diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

/// One diagnostic of `validate -json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Diagnostic {
    /// `error` or `warning`.
    pub severity: String,
    /// One line.
    pub summary: String,
    #[serde(default)]
    /// The details.
    pub detail: String,
}

impl Tofu {
    /// `binary` run with `TF_CLI_CONFIG_FILE=cli_config`.
    pub fn new(binary: impl Into<PathBuf>, cli_config: impl Into<PathBuf>) -> Tofu {
        Tofu {
            binary: binary.into(),
            cli_config: cli_config.into(),
            env: Vec::new(),
        }
    }

    /// The same tofu with one more environment variable for every command (and so for the
    /// providers it starts).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Tofu {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `tofu <args>` in `dir`, whatever its outcome.
    pub fn run(&self, dir: &Path, args: &[&str]) -> Result<Run, TofuError> {
        let what = format!("tofu {} (in {})", args.join(" "), dir.display());
        let mut child = Command::new(&self.binary)
            .args(args)
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("TF_PLUGIN_CACHE_DIR")
            .env_remove("TF_DATA_DIR")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| TofuError::Spawn {
                what: what.clone(),
                source,
            })?;
        // Drain both pipes on threads so a chatty command never blocks on a full pipe.
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|source| TofuError::Spawn {
                what: what.clone(),
                source,
            })? {
                break status;
            }
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                return Err(TofuError::Deadline { what });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Run {
            success: status.success(),
            stdout: out_reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
        })
    }

    /// Runs and fails unless the command succeeds.
    pub fn run_ok(&self, dir: &Path, args: &[&str]) -> Result<Run, TofuError> {
        let run = self.run(dir, args)?;
        if run.success {
            Ok(run)
        } else {
            Err(TofuError::Failed {
                what: format!("tofu {} (in {})", args.join(" "), dir.display()),
                status: "non-zero exit".into(),
                output: format!("{}{}", run.stdout, run.stderr),
            })
        }
    }

    /// `tofu init -backend=false` (providers from the CLI config's installation methods only).
    pub fn init(&self, dir: &Path) -> Result<Run, TofuError> {
        self.run_ok(
            dir,
            &["init", "-backend=false", "-input=false", "-no-color"],
        )
    }

    /// `tofu validate -json`.
    pub fn validate(&self, dir: &Path) -> Result<Validation, TofuError> {
        let run = self.run(dir, &["validate", "-json", "-no-color"])?;
        serde_json::from_str(&run.stdout).map_err(|source| TofuError::Output {
            what: format!("tofu validate (in {})", dir.display()),
            source,
            output: format!("{}{}", run.stdout, run.stderr),
        })
    }

    /// `tofu test` of the module in `dir`.
    pub fn test(&self, dir: &Path) -> Result<Run, TofuError> {
        self.run(dir, &["test", "-no-color"])
    }

    /// `tofu fmt -check -recursive`: the files that are not formatted.
    pub fn fmt_check(&self, dir: &Path) -> Result<Vec<String>, TofuError> {
        let run = self.run(
            dir,
            &["fmt", "-check", "-recursive", "-list=true", "-no-color"],
        )?;
        Ok(run
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// Evaluates a provider-free module: `init`, `apply` with `vars` on a local state, then
    /// `output -json`. Returns each output's value.
    pub fn apply_outputs(
        &self,
        dir: &Path,
        vars: &serde_json::Value,
    ) -> Result<BTreeMap<String, serde_json::Value>, TofuError> {
        self.run_ok(dir, &["init", "-input=false", "-no-color"])?;
        let vars_file = dir.join("stratus-test.tfvars.json");
        std::fs::write(&vars_file, vars.to_string()).map_err(|source| TofuError::Spawn {
            what: format!("writing {}", vars_file.display()),
            source,
        })?;
        let var_arg = format!("-var-file={}", vars_file.display());
        self.run_ok(
            dir,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-no-color",
                &var_arg,
            ],
        )?;
        let run = self.run_ok(dir, &["output", "-json", "-no-color"])?;
        let outputs: BTreeMap<String, OutputValue> =
            serde_json::from_str(&run.stdout).map_err(|source| TofuError::Output {
                what: format!("tofu output -json (in {})", dir.display()),
                source,
                output: run.stdout.clone(),
            })?;
        Ok(outputs.into_iter().map(|(k, v)| (k, v.value)).collect())
    }

    /// Like [`Tofu::apply_outputs`] but expects the apply to fail (bad input): returns its output.
    pub fn apply_failure(&self, dir: &Path, vars: &serde_json::Value) -> Result<String, TofuError> {
        match self.apply_outputs(dir, vars) {
            Ok(outputs) => Err(TofuError::Failed {
                what: format!("tofu apply (in {})", dir.display()),
                status: "succeeded where a failure was expected".into(),
                output: format!("{outputs:?}"),
            }),
            Err(TofuError::Failed { output, .. }) => Ok(output),
            Err(other) => Err(other),
        }
    }
}

#[derive(Deserialize)]
struct OutputValue {
    value: serde_json::Value,
}
