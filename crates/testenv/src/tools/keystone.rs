//! Keystone for the OpenStack test cloud: a venv of its own (`$STRATUS_CACHE/openstack/venv`,
//! every package pinned in `crates/testenv/python/openstack-requirements.txt`: Keystone 30.0.0
//! served by uWSGI 2.0.31, and openstacksdk 4.22.0 for the conformance test), installed on first
//! use only — the AWS suites never pay for it — under its own lock with progress shown.
//!
//! Bootstrapping Keystone costs four `keystone-manage` runs of several seconds each, so it is done
//! once into a template (`db_sync`, fernet and credential keys, `bootstrap` with the admin user,
//! project and `RegionOne`); each environment copies the template ([`Keystone::instantiate`])
//! and writes its own `keystone.conf` (SQLite path, key paths, token expiry).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::time::Instant;

use super::{lock, progress, stamp_matches};
use crate::tools::install::{fnv1a64, run_logged, Paths};

/// The pinned requirements of the venv.
pub const REQUIREMENTS: &str = include_str!("../../python/openstack-requirements.txt");
/// The Keystone release installed (also pinned in [`REQUIREMENTS`]).
pub const KEYSTONE_VERSION: &str = "30.0.0";
/// The region the template's catalog is in.
pub const REGION: &str = "RegionOne";
/// The bootstrap admin's user and project name (Default domain).
pub const ADMIN: &str = "admin";

/// Bumped when the template recipe changes.
const TEMPLATE_RECIPE: &str = "keystone-template-v1";

/// An installed Keystone venv and its bootstrapped template.
#[derive(Clone)]
pub struct Keystone {
    /// The venv.
    pub venv: PathBuf,
    /// `uwsgi` in the venv.
    pub uwsgi: PathBuf,
    /// `python` in the venv (with openstacksdk).
    pub python: PathBuf,
    /// The bootstrapped template directory.
    pub template: PathBuf,
    /// The template admin's password.
    pub admin_password: String,
    /// How long the venv install took in this call (None: it was cached).
    pub installed_in: Option<Duration>,
    /// How long the template bootstrap took in this call (None: it was cached).
    pub bootstrapped_in: Option<Duration>,
}

impl std::fmt::Debug for Keystone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keystone")
            .field("venv", &self.venv)
            .field("template", &self.template)
            .field("admin_password", &"<redacted>")
            .field("installed_in", &self.installed_in)
            .field("bootstrapped_in", &self.bootstrapped_in)
            .finish()
    }
}

/// What a copy of the template is configured with.
#[derive(Debug, Clone)]
pub struct KeystoneConfig {
    /// `[token] expiration`: token lifetime.
    pub token_expiration: Duration,
}

/// Makes sure the venv and the template exist, installing and bootstrapping what is missing.
/// Blocking; safe to call from several processes at once.
pub fn ensure_keystone() -> Result<Keystone> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "openstack")?;
    let root = paths.cache.join("openstack");
    let venv = root.join("venv");
    let uwsgi = venv.join("bin/uwsgi");
    let python = venv.join("bin/python");
    let manage = venv.join("bin/keystone-manage");
    let requirements_stamp = format!("{:016x}\n", fnv1a64(REQUIREMENTS.as_bytes()));

    let stamp = venv.join(".stratus-stamp");
    let mut installed_in = None;
    if !stamp_matches(&stamp, &requirements_stamp, &[&uwsgi, &python, &manage]) {
        installed_in = Some(install_venv(&paths, &venv, &stamp, &requirements_stamp)?);
    }

    let template = root.join("keystone-template");
    let template_stamp = template.join(".stratus-stamp");
    let template_value = format!("{TEMPLATE_RECIPE} {requirements_stamp}");
    let password_file = template.join("admin-password");
    let mut bootstrapped_in = None;
    if !stamp_matches(&template_stamp, &template_value, &[&password_file]) {
        bootstrapped_in = Some(bootstrap_template(&paths, &manage, &template)?);
        fs::write(&template_stamp, &template_value)?;
    }
    let admin_password = fs::read_to_string(&password_file)
        .with_context(|| format!("reading {}", password_file.display()))?
        .trim()
        .to_owned();
    Ok(Keystone {
        venv,
        uwsgi,
        python,
        template,
        admin_password,
        installed_in,
        bootstrapped_in,
    })
}

fn install_venv(paths: &Paths, venv: &Path, stamp: &Path, value: &str) -> Result<Duration> {
    let started = Instant::now();
    progress(&format!(
        "installing Keystone {KEYSTONE_VERSION}, uWSGI and openstacksdk into {} (first time only, a few minutes; output in {})",
        venv.display(),
        paths.install_log.display()
    ));
    if venv.exists() {
        fs::remove_dir_all(venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    if let Some(parent) = venv.parent() {
        fs::create_dir_all(parent)?;
    }
    let python = std::env::var_os("STRATUS_PYTHON").unwrap_or_else(|| "python3".into());
    let mut cmd = Command::new(python);
    cmd.args(["-m", "venv"]).arg(venv);
    run_logged(cmd, &paths.install_log, "python3 -m venv (openstack)")?;
    let requirements = venv.join("requirements.txt");
    fs::write(&requirements, REQUIREMENTS)?;
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args(["-m", "pip", "install", "--disable-pip-version-check", "-r"])
        .arg(&requirements);
    // uWSGI is built from source: a C compiler and the Python headers must be present.
    run_logged(
        cmd,
        &paths.install_log,
        "pip install (keystone, uwsgi, openstacksdk)",
    )
    .context("installing the OpenStack venv (uWSGI needs gcc and python3-dev)")?;
    fs::write(stamp, value).with_context(|| format!("writing {}", stamp.display()))?;
    let took = started.elapsed();
    progress(&format!(
        "installed the OpenStack venv in {} s",
        took.as_secs()
    ));
    Ok(took)
}

/// `keystone.conf` for a Keystone whose files are in `dir`.
pub fn config_text(dir: &Path, token_expiration: Duration) -> String {
    let d = dir.display();
    format!(
        "[DEFAULT]\nuse_stderr = true\n\n\
         [database]\nconnection = sqlite:///{d}/keystone.db\n\n\
         [token]\nprovider = fernet\nexpiration = {}\n\n\
         [fernet_tokens]\nkey_repository = {d}/fernet-keys\n\n\
         [fernet_receipts]\nkey_repository = {d}/fernet-receipts\n\n\
         [credential]\nkey_repository = {d}/credential-keys\n\n\
         [identity]\npassword_hash_rounds = 4\n\n\
         [cache]\nenabled = true\nbackend = dogpile.cache.memory\n",
        token_expiration.as_secs().max(1)
    )
}

fn bootstrap_template(paths: &Paths, manage: &Path, template: &Path) -> Result<Duration> {
    let started = Instant::now();
    progress("bootstrapping the Keystone template (first time only, about a minute)");
    let tmp = template.with_extension(format!("tmp-{}", std::process::id()));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    fs::create_dir_all(&tmp)?;
    let conf = tmp.join("keystone.conf");
    fs::write(&conf, config_text(&tmp, Duration::from_secs(3600)))?;
    let password = crate::core::util::random_token()?;
    let (user, group) = (current_id("-u")?, current_id("-g")?);
    let placeholder = "http://127.0.0.1:1/identity/v3";
    let steps: Vec<(&str, Vec<String>)> = vec![
        ("db_sync", vec!["db_sync".into()]),
        (
            "fernet_setup",
            vec![
                "fernet_setup".into(),
                "--keystone-user".into(),
                user.clone(),
                "--keystone-group".into(),
                group.clone(),
            ],
        ),
        (
            "credential_setup",
            vec![
                "credential_setup".into(),
                "--keystone-user".into(),
                user,
                "--keystone-group".into(),
                group,
            ],
        ),
        (
            "bootstrap",
            [
                "bootstrap",
                "--bootstrap-password",
                &password,
                "--bootstrap-username",
                ADMIN,
                "--bootstrap-project-name",
                ADMIN,
                "--bootstrap-role-name",
                "admin",
                "--bootstrap-service-name",
                "keystone",
                "--bootstrap-region-id",
                REGION,
                "--bootstrap-public-url",
                placeholder,
                "--bootstrap-internal-url",
                placeholder,
                "--bootstrap-admin-url",
                placeholder,
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
    ];
    for (what, args) in steps {
        let mut cmd = Command::new(manage);
        cmd.arg("--config-file").arg(&conf).args(&args);
        run_logged(cmd, &paths.install_log, &format!("keystone-manage {what}"))?;
    }
    for dir in ["fernet-keys", "fernet-receipts", "credential-keys"] {
        if !tmp.join(dir).join("0").is_file() {
            bail!(
                "keystone-manage left no keys in {}",
                tmp.join(dir).display()
            );
        }
    }
    fs::write(tmp.join("admin-password"), &password)?;
    fs::remove_file(&conf)?;
    if template.exists() {
        fs::remove_dir_all(template)?;
    }
    fs::rename(&tmp, template)
        .with_context(|| format!("moving {} to {}", tmp.display(), template.display()))?;
    let took = started.elapsed();
    progress(&format!(
        "bootstrapped the Keystone template in {} s",
        took.as_secs()
    ));
    Ok(took)
}

/// `id -u` / `id -g` of this process.
fn current_id(flag: &str) -> Result<String> {
    let out = Command::new("id")
        .arg(flag)
        .output()
        .context("running id")?;
    anyhow::ensure!(out.status.success(), "id {flag} failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl Keystone {
    /// Copies the template into `dir` with a `keystone.conf` for `config`; returns the
    /// configuration file's path.
    pub fn instantiate(&self, dir: &Path, config: &KeystoneConfig) -> Result<PathBuf> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        fs::copy(self.template.join("keystone.db"), dir.join("keystone.db"))
            .context("copying the Keystone database")?;
        for keys in ["fernet-keys", "fernet-receipts", "credential-keys"] {
            let target = dir.join(keys);
            fs::create_dir_all(&target)?;
            for entry in fs::read_dir(self.template.join(keys))? {
                let entry = entry?;
                fs::copy(entry.path(), target.join(entry.file_name()))?;
            }
        }
        let conf = dir.join("keystone.conf");
        fs::write(&conf, config_text(dir, config.token_expiration))?;
        Ok(conf)
    }

    /// uWSGI's arguments serving Keystone under `/identity` on `port` with `conf`.
    pub fn uwsgi_args(&self, port: u16, conf: &Path) -> Vec<std::ffi::OsString> {
        [
            "--http-socket".to_owned(),
            format!("127.0.0.1:{port}"),
            "--mount".to_owned(),
            "/identity=keystone.wsgi.api:application".to_owned(),
            "--manage-script-name".to_owned(),
            "--env".to_owned(),
            format!("OS_KEYSTONE_CONFIG_FILES={}", conf.display()),
            "--master".to_owned(),
            "--processes".to_owned(),
            "1".to_owned(),
            "--threads".to_owned(),
            "4".to_owned(),
            "--die-on-term".to_owned(),
            // The worker loads Keystone, not the master: one copy in memory.
            "--lazy-apps".to_owned(),
            "--need-app".to_owned(),
            "--buffer-size".to_owned(),
            "65535".to_owned(),
            "--disable-logging".to_owned(),
            // uWSGI's http-socket closes every connection after one answer; saying so keeps
            // pooling clients (hyper) from sending the next request on a closed connection.
            "--add-header".to_owned(),
            "Connection: close".to_owned(),
        ]
        .into_iter()
        .map(Into::into)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_point_every_path_into_the_environment() {
        let text = config_text(Path::new("/env/keystone"), Duration::from_secs(5));
        assert!(
            text.contains("connection = sqlite:////env/keystone/keystone.db"),
            "{text}"
        );
        assert!(text.contains("expiration = 5\n"));
        assert!(text.contains("key_repository = /env/keystone/fernet-keys"));
        assert!(text.contains("key_repository = /env/keystone/credential-keys"));
        assert!(config_text(Path::new("/x"), Duration::ZERO).contains("expiration = 1\n"));
        assert!(REQUIREMENTS.contains(&format!("keystone=={KEYSTONE_VERSION}")));
        assert!(REQUIREMENTS.lines().any(|l| l.starts_with("uWSGI==")));
        assert!(REQUIREMENTS
            .lines()
            .any(|l| l.starts_with("openstacksdk==")));
    }
}
