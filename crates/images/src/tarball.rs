//! Writing a tree as a gzipped tar stream (an image layer or a node tarball), reproducibly
//! (every mtime 0, entries sorted), with the digests and sizes of both the tar and the gzip.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, Result};
use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest as _, Sha256};

use crate::rootfs::{Entry, Plan, Source};

/// A blob's identity: `sha256:<hex>` and its length in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Bytes.
    pub size: u64,
}

/// What writing a gzipped tar produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The gzip stream (the layer blob).
    pub compressed: Blob,
    /// The tar stream inside (the layer's diff ID).
    pub uncompressed: Blob,
}

/// A writer that hashes and counts what passes through it.
pub struct Hashing<W> {
    inner: W,
    hash: Sha256,
    size: u64,
}

impl<W: Write> Hashing<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Hashing {
            inner,
            hash: Sha256::new(),
            size: 0,
        }
    }

    /// The inner writer and the blob written so far.
    pub fn finish(self) -> (W, Blob) {
        let blob = Blob {
            digest: format!("sha256:{:x}", self.hash.finalize()),
            size: self.size,
        };
        (self.inner, blob)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The digest of bytes held in memory.
pub fn blob_of(bytes: &[u8]) -> Blob {
    Blob {
        digest: format!("sha256:{:x}", Sha256::digest(bytes)),
        size: bytes.len() as u64,
    }
}

/// Writes `plan` as a gzipped tar to `out`.
pub fn write(plan: &Plan, out: &Path) -> Result<Written> {
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let gz = GzEncoder::new(Hashing::new(file), Compression::default());
    let mut tar = tar::Builder::new(Hashing::new(gz));
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, entry) in &plan.entries {
        // Paths in a layer are relative to the root.
        let name = path.trim_start_matches('/');
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        match entry {
            Entry::Dir { mode, owner } => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(*mode);
                header.set_uid((*owner).into());
                header.set_gid((*owner).into());
                header.set_size(0);
                tar.append_data(&mut header, format!("{name}/"), io::empty())?;
            }
            Entry::Symlink { target } => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_uid(0);
                header.set_gid(0);
                header.set_size(0);
                tar.append_link(&mut header, name, target)?;
            }
            Entry::File { mode, source } => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_uid(0);
                header.set_gid(0);
                match source {
                    Source::Host(from) => {
                        let file = File::open(from)
                            .with_context(|| format!("opening {}", from.display()))?;
                        header.set_size(file.metadata()?.len());
                        tar.append_data(&mut header, name, file)
                            .with_context(|| format!("adding {}", from.display()))?;
                    }
                    Source::Bytes(bytes) => {
                        header.set_size(bytes.len() as u64);
                        tar.append_data(&mut header, name, bytes.as_slice())?;
                    }
                }
            }
        }
    }
    let (gz, uncompressed) = tar.into_inner()?.finish();
    let mut hashing = gz.finish()?;
    hashing.flush()?;
    let (file, compressed) = hashing.finish();
    file.sync_all()?;
    Ok(Written {
        compressed,
        uncompressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Read as _;

    #[test]
    fn writes_a_reproducible_layer_with_both_digests() {
        let dir = tempfile::tempdir().unwrap();
        let mut entries = BTreeMap::new();
        entries.insert(
            "/etc".to_owned(),
            Entry::Dir {
                mode: 0o755,
                owner: 0,
            },
        );
        entries.insert(
            "/etc/passwd".to_owned(),
            Entry::File {
                mode: 0o644,
                source: Source::Bytes(b"root:x:0:0::/:/sbin/nologin\n".to_vec()),
            },
        );
        entries.insert(
            "/etc/mtab".to_owned(),
            Entry::Symlink {
                target: "/proc/self/mounts".to_owned(),
            },
        );
        let plan = Plan { entries };
        let a = write(&plan, &dir.path().join("a.tar.gz")).unwrap();
        let b = write(&plan, &dir.path().join("b.tar.gz")).unwrap();
        assert_eq!(a, b);
        let bytes = std::fs::read(dir.path().join("a.tar.gz")).unwrap();
        assert_eq!(blob_of(&bytes), a.compressed);
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(blob_of(&tar), a.uncompressed);
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<(String, Option<String>)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let link = e.link_name().unwrap().map(|l| l.to_string_lossy().into());
                (e.path().unwrap().to_string_lossy().into_owned(), link)
            })
            .collect();
        assert_eq!(
            names,
            [
                ("etc/".into(), None),
                ("etc/mtab".into(), Some("/proc/self/mounts".into())),
                ("etc/passwd".into(), None)
            ]
        );
    }
}
