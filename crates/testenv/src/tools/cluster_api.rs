//! The real Cluster API core manager (`sigs.k8s.io/cluster-api` v1.14.2, package
//! `sigs.k8s.io/cluster-api/core`) and its CRDs (`core/config/crd/bases/` of the same module),
//! for the capdvp suites. The module has `replace` lines, so it is built through the wrapper
//! module `crates/testenv/go-capi` (requiring `sigs.k8s.io/cluster-api` and
//! `sigs.k8s.io/cluster-api/api` at one release, with a `tool` directive). Built on first use,
//! cached in `$STRATUS_CACHE/cluster-api/` with a stamp, under its own lock.
//!
//! One change to the upstream source before building: the manager's webhook server has no flag
//! for its address and would listen on every interface, so the build copies the module and sets
//! its host to 127.0.0.1 ([`bind_webhook_to_loopback`]), replacing the module with that copy in a
//! copy of the wrapper. Every other listener is moved by flags.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{go, go_build, lock, progress, stamp_matches};
use crate::tools::install::{fnv1a64, required_version, Paths};

/// The main package of the manager.
pub const PACKAGE: &str = "sigs.k8s.io/cluster-api/core";
/// The module.
pub const MODULE: &str = "sigs.k8s.io/cluster-api";

/// The installed manager and CRDs.
#[derive(Debug, Clone)]
pub struct ClusterApi {
    /// The manager binary.
    pub manager: PathBuf,
    /// The directory of CRD YAML files.
    pub crds: PathBuf,
    /// The release (`v1.14.2`).
    pub version: String,
}

/// The wrapper module.
pub fn module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-capi")
}

/// The line of `core/main.go` that sets the webhook server's port; the host goes before it.
const WEBHOOK_PORT_LINE: &str = "Port:     webhookPort,";

/// `core/main.go` with its webhook server bound to 127.0.0.1, or an error when the line the
/// change hangs on is not there exactly once (a new release must be looked at, not guessed).
pub fn bind_webhook_to_loopback(main_go: &str) -> Result<String> {
    let found = main_go.matches(WEBHOOK_PORT_LINE).count();
    if found != 1 {
        bail!("core/main.go: expected `{WEBHOOK_PORT_LINE}` once, found it {found} times");
    }
    let at = main_go.find(WEBHOOK_PORT_LINE).unwrap_or_default();
    let indent_start = main_go[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent = &main_go[indent_start..at];
    Ok(format!(
        "{}Host:     \"127.0.0.1\",\n{indent}{}",
        &main_go[..at],
        &main_go[at..]
    ))
}

#[derive(Deserialize)]
struct ModuleInfo {
    #[serde(rename = "Dir")]
    dir: Option<PathBuf>,
}

/// Builds the manager and copies the CRDs unless the stamp records this wrapper's go.mod and
/// go.sum. Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<ClusterApi> {
    let paths = Paths::from_env()?;
    let module = module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))
        .with_context(|| format!("reading {}", module.join("go.mod").display()))?;
    let go_sum = fs::read_to_string(module.join("go.sum")).unwrap_or_default();
    let version =
        required_version(&go_mod, MODULE).context("go-capi/go.mod does not require cluster-api")?;
    let root = paths.cache.join("cluster-api");
    let out = root.join("bin/cluster-api-manager");
    let crds = root.join("crds");
    let stamp = root.join(".stamp");
    let value = format!(
        "{MODULE}@{version} {:016x} webhook-host=127.0.0.1\n",
        fnv1a64(format!("{go_mod}\0{go_sum}").as_bytes())
    );
    let done = ClusterApi {
        manager: out.clone(),
        crds: crds.clone(),
        version: version.to_string(),
    };
    if stamp_matches(&stamp, &value, &[&out, &crds]) {
        return Ok(done);
    }
    let _lock = lock(&paths, "cluster-api")?;
    if stamp_matches(&stamp, &value, &[&out, &crds]) {
        return Ok(done);
    }
    let source = module_source(&module)?;
    let build_dir = patched_build_dir(&root, &module, &source)?;
    let took = go_build(
        &paths,
        &build_dir,
        PACKAGE,
        &format!("-s -w -X sigs.k8s.io/cluster-api/version.gitVersion={version}"),
        &out,
        &format!("cluster-api manager {version}"),
    )?;
    progress(&format!(
        "cluster-api manager {version} built in {} s",
        took.as_secs()
    ));
    let _ = fs::remove_dir_all(&build_dir);
    let source = source.join("core/config/crd/bases");
    let _ = fs::remove_dir_all(&crds);
    fs::create_dir_all(&crds)?;
    for entry in fs::read_dir(&source).with_context(|| format!("reading {}", source.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            fs::copy(&path, crds.join(path.file_name().unwrap_or_default()))?;
        }
    }
    fs::write(&stamp, value)?;
    Ok(done)
}

/// The module's source directory in Go's module cache (downloaded if missing).
fn module_source(wrapper: &std::path::Path) -> Result<PathBuf> {
    let listed = Command::new(go())
        .current_dir(wrapper)
        .args(["mod", "download", "-json", MODULE])
        .stdin(Stdio::null())
        .output()
        .context("go mod download sigs.k8s.io/cluster-api")?;
    if !listed.status.success() {
        bail!(
            "go mod download {MODULE}: {}{}",
            String::from_utf8_lossy(&listed.stdout),
            String::from_utf8_lossy(&listed.stderr)
        );
    }
    let info: ModuleInfo = serde_json::from_slice(&listed.stdout)?;
    info.dir.context("go mod download gave no module directory")
}

/// A build directory: a copy of the wrapper whose `go.mod` replaces the module with a writable
/// copy of `source` in which the webhook server is bound to loopback.
fn patched_build_dir(
    root: &std::path::Path,
    wrapper: &std::path::Path,
    source: &std::path::Path,
) -> Result<PathBuf> {
    let dir = root.join("build");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let copy = dir.join("cluster-api");
    let copied = Command::new("cp")
        .args(["-R", "--no-preserve=mode"])
        .arg(source)
        .arg(&copy)
        .status()
        .context("copying the cluster-api module")?;
    if !copied.success() {
        bail!("cp -R {} {}: {copied}", source.display(), copy.display());
    }
    let main_go = copy.join("core/main.go");
    let text =
        fs::read_to_string(&main_go).with_context(|| format!("reading {}", main_go.display()))?;
    fs::write(&main_go, bind_webhook_to_loopback(&text)?)?;
    let go_mod = fs::read_to_string(wrapper.join("go.mod"))?;
    fs::write(
        dir.join("go.mod"),
        format!("{go_mod}\nreplace {MODULE} => ./cluster-api\n"),
    )?;
    fs::copy(wrapper.join("go.sum"), dir.join("go.sum"))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_pins_both_modules_at_one_release_with_the_tool() {
        let text = fs::read_to_string(module_dir().join("go.mod")).unwrap();
        let core = required_version(&text, MODULE).unwrap();
        let api = required_version(&text, "sigs.k8s.io/cluster-api/api").unwrap();
        assert_eq!(core, api);
        assert_eq!(core, "v1.14.2");
        assert!(text.contains(&format!("tool {PACKAGE}")), "{text}");
    }

    #[test]
    fn the_webhook_server_gets_the_loopback_host_beside_its_port() {
        let main_go = "\t\tWebhookServer: webhook.NewServer(\n\t\t\twebhook.Options{\n\t\t\t\tPort:     webhookPort,\n\t\t\t\tCertDir:  webhookCertDir,\n";
        let patched = bind_webhook_to_loopback(main_go).unwrap();
        assert_eq!(
            patched,
            "\t\tWebhookServer: webhook.NewServer(\n\t\t\twebhook.Options{\n\t\t\t\tHost:     \"127.0.0.1\",\n\t\t\t\tPort:     webhookPort,\n\t\t\t\tCertDir:  webhookCertDir,\n"
        );
    }

    #[test]
    fn a_release_without_the_port_line_is_refused_not_guessed() {
        let err = bind_webhook_to_loopback("webhook.Options{Port: 9443}").unwrap_err();
        assert!(err.to_string().contains("found it 0 times"), "{err}");
        let twice = format!("{WEBHOOK_PORT_LINE}\n{WEBHOOK_PORT_LINE}\n");
        assert!(bind_webhook_to_loopback(&twice).is_err());
    }
}
