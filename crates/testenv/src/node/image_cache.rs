//! The machine's cache of packed test images (`$STRATUS_CACHE/images/`): an image packed from
//! the same binary (its path, size and modification time), under the same reference, is packed
//! once and imported by every later suite, instead of once per suite. A rebuilt binary has a
//! new modification time, so a stale archive is never used; older archives of the same image
//! are removed when a newer one is written.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::node::images::ImageArchive;
use crate::tools::install::Paths;

/// Bumped when the packing code changes what it writes, so older archives are not reused.
const FORMAT: &str = "image-cache-v1";

/// An archive not used for this long, of an image packed anew, is removed.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The inputs that decide an image's bytes: the binary packed and the reference it gets.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The binary (its path, size and modification time are the key).
    pub binary: &'a Path,
    /// `repository:tag`, or a name for what packing will tag (a Stratus binary's version).
    pub reference: &'a str,
    /// The image's short name, the cache entry's prefix.
    pub name: &'a str,
}

/// The key of `inputs`: hex SHA-256 over the format, the binary's canonical path, size and
/// modification time, and the reference.
pub fn key(inputs: &Inputs<'_>) -> Result<String> {
    let binary = fs::canonicalize(inputs.binary)
        .with_context(|| format!("reading {}", inputs.binary.display()))?;
    let meta = fs::metadata(&binary)?;
    let modified = meta
        .modified()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let mut hash = Sha256::new();
    for part in [
        FORMAT.to_owned(),
        binary.display().to_string(),
        meta.len().to_string(),
        modified.as_nanos().to_string(),
        inputs.reference.to_owned(),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    Ok(format!("{:x}", hash.finalize()))
}

/// The image `inputs` describes, from the cache, or packed by `pack` (into the directory it is
/// given) and kept in the cache. Safe beside other processes doing the same: an entry is
/// written to a private directory and renamed into place whole.
pub fn packed(
    inputs: &Inputs<'_>,
    pack: impl FnOnce(&Path) -> Result<ImageArchive>,
) -> Result<ImageArchive> {
    packed_in(&Paths::from_env()?.cache.join("images"), inputs, pack)
}

/// [`packed`] with the cache at `root`.
fn packed_in(
    root: &Path,
    inputs: &Inputs<'_>,
    pack: impl FnOnce(&Path) -> Result<ImageArchive>,
) -> Result<ImageArchive> {
    let root = root.to_owned();
    fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let entry = root.join(format!("{}-{}", inputs.name, &key(inputs)?[..16]));
    if let Some(archive) = read_entry(&entry)? {
        return Ok(archive);
    }
    let scratch = tempfile::Builder::new()
        .prefix(".packing-")
        .tempdir_in(&root)?;
    let made = pack(scratch.path())?;
    let file = made
        .archive
        .file_name()
        .context("the packed archive has no file name")?
        .to_owned();
    let record = serde_json::json!({
        "file": file.to_string_lossy(),
        "repository": made.repository,
        "tag": made.tag,
    });
    fs::write(scratch.path().join("image.json"), record.to_string())?;
    let scratch = scratch.keep();
    if let Err(e) = fs::rename(&scratch, &entry) {
        // Another process wrote the same entry first: theirs is as good.
        fs::remove_dir_all(&scratch).ok();
        if !entry.join("image.json").is_file() {
            return Err(e).with_context(|| format!("keeping {}", entry.display()));
        }
    }
    remove_stale(&root, inputs.name, &entry);
    read_entry(&entry)?.with_context(|| format!("{} was not kept", entry.display()))
}

/// The archive recorded in `entry`, if the entry is complete.
fn read_entry(entry: &Path) -> Result<Option<ImageArchive>> {
    let Ok(text) = fs::read_to_string(entry.join("image.json")) else {
        return Ok(None);
    };
    let record: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("reading {}/image.json", entry.display()))?;
    let field = |name: &str| record[name].as_str().map(str::to_owned);
    let (Some(file), Some(repository), Some(tag)) =
        (field("file"), field("repository"), field("tag"))
    else {
        return Ok(None);
    };
    let archive = entry.join(file);
    if !archive.is_file() {
        return Ok(None);
    }
    // Touched so that pruning sees it in use.
    fs::File::open(entry.join("image.json"))?.set_modified(SystemTime::now())?;
    Ok(Some(ImageArchive {
        archive,
        repository,
        tag,
    }))
}

/// Removes the other entries of `name` not used for [`STALE_AFTER`] (an older build's), and
/// abandoned packing directories; best effort.
fn remove_stale(root: &Path, name: &str, keep: &Path) {
    let prefix = format!("{name}-");
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path: PathBuf = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let ours = file_name
            .strip_prefix(&prefix)
            .is_some_and(|rest| rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit()));
        if path == keep || !(ours || file_name.starts_with(".packing-")) {
            continue;
        }
        let used = fs::metadata(path.join("image.json"))
            .or_else(|_| entry.metadata())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        if used.is_some_and(|age| age > STALE_AFTER) {
            fs::remove_dir_all(&path).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_the_binary_and_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("tool");
        fs::write(&binary, b"one").unwrap();
        let inputs = |reference| Inputs {
            binary: &binary,
            reference,
            name: "tool",
        };
        let first = key(&inputs("example/tool:1")).unwrap();
        assert_eq!(first, key(&inputs("example/tool:1")).unwrap());
        assert_ne!(first, key(&inputs("example/tool:2")).unwrap());
        fs::write(&binary, b"rebuilt").unwrap();
        assert_ne!(first, key(&inputs("example/tool:1")).unwrap());
    }

    #[test]
    fn an_image_is_packed_once_and_again_after_a_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("images");
        let binary = dir.path().join("tool");
        fs::write(&binary, b"one").unwrap();
        let inputs = Inputs {
            binary: &binary,
            reference: "example/tool:1",
            name: "tool",
        };
        let packs = std::cell::Cell::new(0);
        let pack = |out: &Path| {
            packs.set(packs.get() + 1);
            let archive = out.join("tool.tar");
            fs::write(&archive, fs::read(&binary)?)?;
            Ok(ImageArchive {
                archive,
                repository: "example/tool".into(),
                tag: "1".into(),
            })
        };
        let first = packed_in(&root, &inputs, pack).unwrap();
        let again = packed_in(&root, &inputs, pack).unwrap();
        assert_eq!(
            packs.get(),
            1,
            "the second suite imports the first one's archive"
        );
        assert_eq!(first.archive, again.archive);
        assert_eq!(again.reference(), "example/tool:1");
        assert_eq!(fs::read(&again.archive).unwrap(), b"one");

        fs::write(&binary, b"rebuilt binary").unwrap();
        let rebuilt = packed_in(&root, &inputs, pack).unwrap();
        assert_eq!(packs.get(), 2, "a rebuilt binary is packed anew");
        assert_eq!(fs::read(&rebuilt.archive).unwrap(), b"rebuilt binary");
        assert!(first.archive.is_file(), "an archive in use is not removed");
    }
}
