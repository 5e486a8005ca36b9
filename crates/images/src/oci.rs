//! OCI image documents (config, manifest, index) and the image layout they are written into:
//! `oci-layout`, `index.json`, `blobs/sha256/…`; packed as an `oci-archive` (a tar of the
//! layout, as skopeo's `oci-archive:` transport reads it).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use stratus_runtime::build_info::BuildInfo;

use crate::rootfs::{CA_BUNDLE, NONROOT_UID};
use crate::tarball::{blob_of, Blob, Written};

/// Media type of an image manifest.
pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of an image config.
pub const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of a gzipped layer.
pub const LAYER_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Where the sources live (`org.opencontainers.image.source`).
pub const SOURCE_URL: &str = "https://github.com/stratus/stratus";

/// The image's labels: source, version, revision and creation date (the build's).
pub fn labels(build: &BuildInfo) -> BTreeMap<String, String> {
    [
        ("source", SOURCE_URL),
        ("version", build.version),
        ("revision", build.revision),
        ("created", build.date),
    ]
    .into_iter()
    .map(|(k, v)| (format!("org.opencontainers.image.{k}"), v.to_owned()))
    .collect()
}

/// The image's `PATH`: its binary's directory, then the host tools' (empty in most images).
pub fn path() -> String {
    std::iter::once("/usr/local/bin")
        .chain(crate::host_tools::DIRS.iter().copied())
        .collect::<Vec<_>>()
        .join(":")
}

/// The image config: one layer, the binary as entrypoint, run as the non-root user.
pub fn config(entrypoint: &str, build: &BuildInfo, layer: &Written) -> Value {
    let mut config = json!({
        "architecture": go_arch(),
        "os": "linux",
        "config": {
            "User": format!("{NONROOT_UID}:{NONROOT_UID}"),
            "Entrypoint": [entrypoint],
            "Env": [
                format!("PATH={}", path()),
                format!("SSL_CERT_FILE={CA_BUNDLE}"),
            ],
            "WorkingDir": "/",
            "Labels": labels(build),
        },
        "rootfs": { "type": "layers", "diff_ids": [layer.uncompressed.digest] },
        "history": [{ "created_by": "stratus-images", "comment": build.version_line() }],
    });
    // `created` is optional; a build without a date leaves it out rather than invent one.
    if build.date != stratus_runtime::build_info::UNKNOWN {
        config["created"] = json!(build.date);
    }
    config
}

/// The image manifest for a config blob and one layer.
pub fn manifest(config: &Blob, layer: &Blob, build: &BuildInfo) -> Value {
    json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": { "mediaType": CONFIG_TYPE, "digest": config.digest, "size": config.size },
        "layers": [{ "mediaType": LAYER_TYPE, "digest": layer.digest, "size": layer.size }],
        "annotations": labels(build),
    })
}

/// The layout's index: the one manifest, named by `tag`.
pub fn index(manifest: &Blob, tag: &str) -> Value {
    json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_TYPE,
            "digest": manifest.digest,
            "size": manifest.size,
            "annotations": { "org.opencontainers.image.ref.name": tag },
        }],
    })
}

/// Go's name for this architecture, as image configs spell it.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The path of a blob inside a layout.
pub fn blob_path(layout: &Path, blob: &Blob) -> std::path::PathBuf {
    let hex = blob.digest.trim_start_matches("sha256:");
    layout.join("blobs/sha256").join(hex)
}

/// Writes JSON as a blob of the layout; returns the blob.
pub fn write_json_blob(layout: &Path, value: &Value) -> Result<Blob> {
    let bytes = serde_json::to_vec(value)?;
    let blob = blob_of(&bytes);
    fs::write(blob_path(layout, &blob), bytes)?;
    Ok(blob)
}

/// Writes `oci-layout` and `index.json` into `layout`.
pub fn write_layout_files(layout: &Path, manifest: &Blob, tag: &str) -> Result<()> {
    fs::write(
        layout.join("oci-layout"),
        serde_json::to_vec(&json!({ "imageLayoutVersion": "1.0.0" }))?,
    )?;
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index(manifest, tag))?,
    )?;
    Ok(())
}

/// Packs the layout directory as an `oci-archive` at `out` (a plain tar, entries sorted).
pub fn archive(layout: &Path, out: &Path) -> Result<()> {
    let file = fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut tar = tar::Builder::new(file);
    tar.mode(tar::HeaderMode::Deterministic);
    let mut blobs: Vec<_> = fs::read_dir(layout.join("blobs/sha256"))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()?;
    blobs.sort();
    for name in ["oci-layout", "index.json"] {
        tar.append_path_with_name(layout.join(name), name)?;
    }
    tar.append_dir("blobs", layout.join("blobs"))?;
    tar.append_dir("blobs/sha256", layout.join("blobs/sha256"))?;
    for name in blobs {
        let rel = Path::new("blobs/sha256").join(&name);
        tar.append_path_with_name(layout.join(&rel), &rel)?;
    }
    tar.into_inner()?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> BuildInfo {
        BuildInfo {
            version: "1.2.3",
            revision: "abc",
            date: "2026-01-02T03:04:05Z",
        }
    }

    #[test]
    fn config_runs_the_entrypoint_as_nonroot_with_labels() {
        let layer = Written {
            compressed: Blob {
                digest: "sha256:aa".into(),
                size: 1,
            },
            uncompressed: Blob {
                digest: "sha256:bb".into(),
                size: 2,
            },
        };
        let c = config("/usr/local/bin/x", &build(), &layer);
        assert_eq!(c["config"]["User"], "65532:65532");
        assert_eq!(c["config"]["Entrypoint"][0], "/usr/local/bin/x");
        assert_eq!(c["rootfs"]["diff_ids"][0], "sha256:bb");
        assert_eq!(c["created"], "2026-01-02T03:04:05Z");
        let l = &c["config"]["Labels"];
        assert_eq!(l["org.opencontainers.image.version"], "1.2.3");
        assert_eq!(l["org.opencontainers.image.revision"], "abc");
        assert_eq!(
            l["org.opencontainers.image.created"],
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(l["org.opencontainers.image.source"], SOURCE_URL);

        let undated = BuildInfo {
            date: stratus_runtime::build_info::UNKNOWN,
            ..build()
        };
        assert!(config("/x", &undated, &layer).get("created").is_none());

        let m = manifest(&layer.uncompressed, &layer.compressed, &build());
        assert_eq!(m["layers"][0]["digest"], "sha256:aa");
        assert_eq!(m["config"]["size"], 2);
        let i = index(&layer.compressed, "1.2.3");
        assert_eq!(
            i["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
            "1.2.3"
        );
    }
}
