//! The images a real cluster runs, packed without a Docker daemon by `stratus-images` (the
//! code `make images` uses): the sandbox's pause image and Stratus's own binaries from this
//! build's target directory, imported into containerd under the names the charts pull.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use stratus_images::artifact::{self, Sources};
use stratus_images::table::{self, Binary, Kind};
use stratus_runtime::build_info::{BuildInfo, BUILD};

use crate::node::containerd::PAUSE_IMAGE;
use crate::node::image_cache;

/// An OCI archive and the repository it is imported as (the tag is inside the archive).
#[derive(Debug, Clone)]
pub struct ImageArchive {
    /// The `oci-archive` tarball.
    pub archive: PathBuf,
    /// `ghcr.io/stratus/<name>` or `registry.k8s.io/pause`.
    pub repository: String,
    /// The tag inside the archive.
    pub tag: String,
}

impl ImageArchive {
    /// `repository:tag`.
    pub fn reference(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }
}

/// The build machine's CA bundle (what `make images` puts in every image).
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Packs the pause binary as `registry.k8s.io/pause:3.10.1`.
pub fn pause(binary: &Path) -> Result<ImageArchive> {
    foreign(binary, PAUSE_IMAGE)
}

/// Packs the upstream CSI sidecars testenv builds (provisioner, attacher, resizer) as
/// `registry.k8s.io/sig-storage/<name>:<the version built>`; the references are returned with
/// the archives so a chart can be pointed at exactly what was built.
pub fn csi_sidecars() -> Result<Vec<ImageArchive>> {
    let built = crate::tools::csi_sidecars::ensure_installed()?;
    crate::tools::csi_sidecars::ALL
        .iter()
        .zip([&built.provisioner, &built.attacher, &built.resizer])
        .map(|(sidecar, binary)| {
            let reference = format!(
                "registry.k8s.io/sig-storage/{}:{}",
                sidecar.name, sidecar.version
            );
            foreign(binary, &reference)
        })
        .collect()
}

/// Packs a binary that is not Stratus's as `reference` (`repository:tag`), by the code
/// `make images` uses: the binary as entrypoint, its libraries, the CA bundle, the non-root user.
pub fn foreign(binary: &Path, reference: &str) -> Result<ImageArchive> {
    let (repository, tag) = reference
        .rsplit_once(':')
        .with_context(|| format!("{reference} has no tag"))?;
    let name = repository.rsplit('/').next().unwrap_or(repository);
    // The table wants static names; the few foreign images a test packs live as long as it.
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let tag_static: &'static str = Box::leak(tag.to_owned().into_boxed_str());
    let build = BuildInfo {
        version: tag_static,
        ..BUILD
    };
    let packed = Binary {
        name,
        package: name,
        kind: Kind::Image,
        profile: table::RELEASE,
        tools: &[],
    };
    let inputs = image_cache::Inputs {
        binary,
        reference,
        name,
    };
    image_cache::packed(&inputs, |out_dir| {
        let made = artifact::package(
            &packed,
            &Sources {
                binary,
                ca_bundle: Path::new(CA_BUNDLE),
                build: &build,
            },
            out_dir,
        )?;
        Ok(ImageArchive {
            archive: out_dir.join(made.file),
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    })
}

/// Packs the debug build of the shipped binary `name` (found next to the running test or in
/// the target directory's `debug`) as `ghcr.io/stratus/<name>:<version>`, the image and tag the
/// charts name by default.
pub fn stratus(name: &str) -> Result<ImageArchive> {
    let binary = table::find(name).with_context(|| format!("{name} is not a shipped binary"))?;
    let path = built_binary(name)?;
    let reference = format!("{}:{}", binary.repository(), BUILD.version);
    let inputs = image_cache::Inputs {
        binary: &path,
        reference: &reference,
        name,
    };
    image_cache::packed(&inputs, |out_dir| {
        let made = artifact::package(
            binary,
            &Sources {
                binary: &path,
                ca_bundle: Path::new(CA_BUNDLE),
                build: &BUILD,
            },
            out_dir,
        )?;
        Ok(ImageArchive {
            archive: out_dir.join(made.file),
            repository: binary.repository(),
            tag: made.tag,
        })
    })
}

/// A workspace binary of this build: next to the running executable (a test's `deps/..`).
pub fn built_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the executable's directory")?;
    [dir.join(name), dir.join("..").join(name)]
        .into_iter()
        .find(|candidate| candidate.is_file())
        .with_context(|| {
            format!(
                "{name} not found next to {}; build it first (cargo build -p {name})",
                exe.display()
            )
        })
}
