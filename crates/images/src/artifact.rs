//! Packaging one binary: an `oci-archive` for a server, a `.tar.gz` for a node binary. The same
//! code serves `make images` (release binaries) and the tests (debug binaries).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use stratus_runtime::build_info::BuildInfo;

use crate::rootfs::{self, Entry, Inputs, Plan, Source};
use crate::table::{Binary, Kind};
use crate::{host_tools, ldd, oci, tarball};

/// What packaging one binary produced (one line of the manifest).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Artifact {
    /// The binary's name.
    pub name: String,
    /// `image` or `node-tarball`.
    pub kind: &'static str,
    /// The image repository (`ghcr.io/stratus/<name>`); empty for a node tarball.
    pub image: String,
    /// The tag (the build's version).
    pub tag: String,
    /// The file written, relative to the output folder.
    pub file: String,
    /// The image manifest's digest, or the tarball's.
    pub digest: String,
    /// Bytes a registry stores and a node pulls (manifest, config and the gzipped layer), or
    /// the tarball's size.
    pub compressed_bytes: u64,
    /// Bytes unpacked (the layer's tar stream).
    pub uncompressed_bytes: u64,
}

/// Where the pieces come from.
#[derive(Debug, Clone)]
pub struct Sources<'a> {
    /// The built binary.
    pub binary: &'a Path,
    /// The build machine's CA bundle.
    pub ca_bundle: &'a Path,
    /// The build's identity (labels, tag).
    pub build: &'a BuildInfo,
}

/// The file name an artifact is written under.
pub fn file_name(binary: &Binary, tag: &str) -> String {
    match binary.kind {
        Kind::Image => format!("{}-{tag}.oci.tar", binary.name),
        Kind::NodeTarball => format!("{}-{tag}-linux-{}.tar.gz", binary.name, oci::go_arch()),
    }
}

/// Packages `binary` into `out_dir`.
pub fn package(binary: &Binary, sources: &Sources<'_>, out_dir: &Path) -> Result<Artifact> {
    fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let tag = sources.build.version.to_owned();
    let file = file_name(binary, &tag);
    let out = out_dir.join(&file);
    match binary.kind {
        Kind::Image => image(binary, sources, out_dir, &out, tag, file),
        Kind::NodeTarball => node_tarball(binary, sources, &out, tag, file),
    }
    .with_context(|| format!("packaging {}", binary.name))
}

fn image(
    binary: &Binary,
    sources: &Sources<'_>,
    out_dir: &Path,
    out: &Path,
    tag: String,
    file: String,
) -> Result<Artifact> {
    let root = Path::new("/");
    let tools = host_tools::find(binary.tools, root)?;
    let mut libraries = ldd::libraries(sources.binary)?;
    for tool in &tools {
        libraries.extend(ldd::libraries(&tool.host_path)?);
    }
    libraries.sort();
    libraries.dedup();
    let tool_files = host_tools::present_files(binary.tools, root);
    let plan = rootfs::plan(&Inputs {
        entrypoint: binary.entrypoint(),
        binary: sources.binary.to_owned(),
        tools: tools
            .into_iter()
            .map(|t| (t.image_path, t.host_path))
            .collect(),
        tool_files,
        libraries,
        ca_bundle: sources.ca_bundle.to_owned(),
    });
    let layout = out_dir.join(format!(".layout-{}", binary.name));
    if layout.exists() {
        fs::remove_dir_all(&layout)?;
    }
    fs::create_dir_all(layout.join("blobs/sha256"))?;
    let result = (|| {
        let tmp = layout.join("layer.tmp");
        let layer = tarball::write(&plan, &tmp)?;
        fs::rename(&tmp, oci::blob_path(&layout, &layer.compressed))?;
        let config = oci::write_json_blob(
            &layout,
            &oci::config(&binary.entrypoint(), sources.build, &layer),
        )?;
        let manifest = oci::write_json_blob(
            &layout,
            &oci::manifest(&config, &layer.compressed, sources.build),
        )?;
        oci::write_layout_files(&layout, &manifest, &tag)?;
        oci::archive(&layout, out)?;
        Ok(Artifact {
            name: binary.name.to_owned(),
            kind: "image",
            image: binary.repository(),
            tag,
            file,
            digest: manifest.digest,
            compressed_bytes: manifest.size + config.size + layer.compressed.size,
            uncompressed_bytes: layer.uncompressed.size,
        })
    })();
    fs::remove_dir_all(&layout)?;
    result
}

fn node_tarball(
    binary: &Binary,
    sources: &Sources<'_>,
    out: &Path,
    tag: String,
    file: String,
) -> Result<Artifact> {
    let mut plan = Plan::default();
    plan.entries.insert(
        format!("/{}", binary.name),
        Entry::File {
            mode: 0o755,
            source: Source::Host(PathBuf::from(sources.binary)),
        },
    );
    let written = tarball::write(&plan, out)?;
    Ok(Artifact {
        name: binary.name.to_owned(),
        kind: "node-tarball",
        image: String::new(),
        tag,
        file,
        digest: written.compressed.digest,
        compressed_bytes: written.compressed.size,
        uncompressed_bytes: written.uncompressed.size,
    })
}
