//! The manifest of a `make images` run: one JSON object per artifact (image, tag, digest,
//! compressed and uncompressed size), written beside the artifacts as `manifest.json`.

use std::path::Path;

use anyhow::Result;
use serde_json::{json, Value};

use crate::artifact::Artifact;

/// The manifest's file name in the output folder.
pub const FILE: &str = "manifest.json";

/// The manifest document.
pub fn manifest(artifacts: &[Artifact]) -> Value {
    json!({ "artifacts": artifacts })
}

/// Writes the manifest into `out_dir`.
pub fn write(out_dir: &Path, artifacts: &[Artifact]) -> Result<()> {
    let mut text = serde_json::to_string_pretty(&manifest(artifacts))?;
    text.push('\n');
    std::fs::write(out_dir.join(FILE), text)?;
    Ok(())
}

/// Bytes in MiB with one decimal, for people.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lists_sizes_and_digests() {
        let a = Artifact {
            name: "x".into(),
            kind: "image",
            image: "ghcr.io/stratus/x".into(),
            tag: "0.1.0".into(),
            file: "x-0.1.0.oci.tar".into(),
            digest: "sha256:ab".into(),
            compressed_bytes: 3 * 1024 * 1024,
            uncompressed_bytes: 7,
        };
        let m = manifest(&[a]);
        assert_eq!(m["artifacts"][0]["digest"], "sha256:ab");
        assert_eq!(m["artifacts"][0]["compressed_bytes"], 3 * 1024 * 1024);
        assert_eq!(m["artifacts"][0]["image"], "ghcr.io/stratus/x");
        assert_eq!(mib(3 * 1024 * 1024), "3.0 MiB");
    }
}
