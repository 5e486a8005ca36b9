//! The `virtualization.deckhouse.io` CRDs of the DVP parent cluster, generated (never copied):
//! controller-gen, built from the pinned `sigs.k8s.io/controller-tools` of the wrapper module
//! `crates/testenv/go-virt-crds`, runs over the platform's published API module
//! (`github.com/deckhouse/virtualization/api`, pinned there too). Cached under
//! `$STRATUS_CACHE/virtualization-crds/`; [`install_virtualization_crds`] applies them to an
//! apiserver and waits until every one is established.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use super::{go, go_build, lock, progress, stamp_matches};
use crate::tools::install::{fnv1a64, Paths};

/// The API group the CRDs serve.
pub const GROUP: &str = "virtualization.deckhouse.io";
/// Bumped when the recipe (flags, generator arguments) changes.
const RECIPE: &str = "virt-crds-v1";
/// The API package controller-gen reads.
const API_PACKAGE: &str = "github.com/deckhouse/virtualization/api/core/v1alpha2";
/// How long an applied CRD may take to become established.
const ESTABLISH_DEADLINE: Duration = Duration::from_secs(30);

/// The generated CRDs.
#[derive(Debug, Clone)]
pub struct VirtualizationCrds {
    /// The directory holding one YAML file per CRD.
    pub dir: PathBuf,
    /// The CRD files, sorted.
    pub files: Vec<PathBuf>,
}

/// The wrapper Go module pinning controller-tools and the virtualization API.
pub fn module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-virt-crds")
}

/// Makes sure the CRDs are generated, building controller-gen first if needed. Blocking; safe
/// to call from several processes at once.
pub fn ensure_virtualization_crds() -> Result<VirtualizationCrds> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "virtualization-crds")?;
    let module = module_dir();
    let mut fingerprint = RECIPE.as_bytes().to_vec();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        fingerprint.extend(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let stamp_value = format!("{:016x}\n", fnv1a64(&fingerprint));
    let root = paths.cache.join("virtualization-crds");
    let dir = root.join("crds");
    let stamp = root.join(".stamp");
    if !stamp_matches(&stamp, &stamp_value, &[&dir]) {
        let generator = root.join("bin/controller-gen");
        go_build(
            &paths,
            &module,
            "sigs.k8s.io/controller-tools/cmd/controller-gen",
            "-s -w",
            &generator,
            "controller-gen",
        )?;
        let tmp = root.join(format!("crds.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        progress(&format!("generating the {GROUP} CRDs from {API_PACKAGE}"));
        let out = Command::new(&generator)
            .current_dir(&module)
            .arg("crd")
            .arg(format!("paths={API_PACKAGE}"))
            .arg(format!("output:crd:dir={}", tmp.display()))
            // controller-gen loads packages through `go list`.
            .env("PATH", path_with_go()?)
            .stdin(Stdio::null())
            .output()
            .context("running controller-gen")?;
        if !out.status.success() {
            bail!(
                "controller-gen failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::rename(&tmp, &dir)?;
        fs::write(&stamp, &stamp_value)?;
    }
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    if files.is_empty() {
        bail!("controller-gen wrote no CRD into {}", dir.display());
    }
    Ok(VirtualizationCrds { dir, files })
}

/// `PATH` with the directory of `$STRATUS_GO` (when set) in front.
fn path_with_go() -> Result<std::ffi::OsString> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let go = PathBuf::from(go());
    if let Some(parent) = go.parent().filter(|p| !p.as_os_str().is_empty()) {
        dirs.push(parent.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).context("building PATH")
}

/// Reads the generated CRDs.
pub fn load(crds: &VirtualizationCrds) -> Result<Vec<CustomResourceDefinition>> {
    crds.files
        .iter()
        .map(|file| {
            let text =
                fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))
        })
        .collect()
}

/// Applies every CRD (server-side apply) and waits until each is `Established`, each wait
/// bounded by a deadline that names the CRD.
pub async fn install_virtualization_crds(
    client: &kube::Client,
    crds: &VirtualizationCrds,
) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("stratus-testenv").force();
    let mut names = Vec::new();
    for crd in load(crds)? {
        let name = crd
            .metadata
            .name
            .clone()
            .context("a generated CRD has no name")?;
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
        names.push(name);
    }
    for name in &names {
        let deadline = tokio::time::Instant::now() + ESTABLISH_DEADLINE;
        loop {
            let crd = api.get(name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "CRD {name} not established within {} s",
                    ESTABLISH_DEADLINE.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(names)
}
