//! The on-disk cache shared by invocations: one JSON file per key (registry, region, role and
//! service account), named by the key's SHA-256, mode 0600 in a 0700 directory, replaced
//! atomically (temporary file in the same directory, then rename).
//!
//! An entry is *fresh* during the first half of its token's lifetime and served without any
//! AWS call; after that it is *stale*: refreshed, but still served if AWS cannot be reached
//! while the token is valid. Expired, corrupt, foreign-owned or group/world-accessible files
//! are ignored and replaced.
// Unsafe code in this file: geteuid to check the cache owner (no safe wrapper in std).
#![allow(unsafe_code)]

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::identity::hex;
use crate::secret::Secret;

/// Format version written into every entry; entries of another version are ignored.
const VERSION: u32 = 1;
/// Entries are small; anything larger is not ours.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;

/// What an entry is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    /// The registry host (with port), the response's auth key.
    pub registry: String,
    /// The region of the registry's API.
    pub region: String,
    /// The assumed role, `""` for the node's credentials.
    pub role: String,
    /// The service account of the assumed role, `""` for the node's credentials.
    pub service_account: String,
}

impl CacheKey {
    /// `<sha256 of the key parts>.json`.
    pub fn file_name(&self) -> String {
        let mut hasher = Sha256::new();
        for part in [
            &self.registry,
            &self.region,
            &self.role,
            &self.service_account,
        ] {
            // Length-prefixed, so that no two keys share a byte string.
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        format!("{}.json", hex(&hasher.finalize()))
    }
}

/// Credentials and their lifetime, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The registry user name.
    pub username: String,
    /// The registry password.
    pub password: Secret,
    /// When the token was obtained (Unix seconds).
    pub issued_at: i64,
    /// When the token expires (Unix seconds).
    pub expires_at: i64,
}

impl Entry {
    /// Until when (Unix seconds) the entry is served without asking AWS: half its lifetime.
    pub fn fresh_until(&self) -> i64 {
        self.issued_at + (self.expires_at - self.issued_at).max(0) / 2
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryFile {
    version: u32,
    key: CacheKey,
    #[serde(flatten)]
    entry: Entry,
}

/// The result of a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Within the first half of its lifetime: serve it.
    Fresh(Entry),
    /// Past half its lifetime but not expired: refresh, and fall back to it if that fails.
    Stale(Entry),
    /// Nothing usable; the reason is for verbose logs.
    Miss(&'static str),
}

/// The cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// A cache in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the entry for `key` lives.
    pub fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Reads the entry for `key` at `now` (Unix seconds).
    pub fn lookup(&self, key: &CacheKey, now: i64) -> Lookup {
        let mut file = match fs::File::open(self.path(key)) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Lookup::Miss("no entry"),
            Err(_) => return Lookup::Miss("entry unreadable"),
        };
        let Ok(meta) = file.metadata() else {
            return Lookup::Miss("entry unreadable");
        };
        // SAFETY: geteuid cannot fail.
        if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o077 != 0 {
            return Lookup::Miss("entry not private to this user (ignored)");
        }
        if meta.len() > MAX_ENTRY_BYTES {
            return Lookup::Miss("entry corrupt (ignored)");
        }
        let mut text = Vec::with_capacity(meta.len() as usize);
        if file.read_to_end(&mut text).is_err() {
            return Lookup::Miss("entry unreadable");
        }
        let Ok(stored) = serde_json::from_slice::<EntryFile>(&text) else {
            return Lookup::Miss("entry corrupt (ignored)");
        };
        if stored.version != VERSION || stored.key != *key {
            return Lookup::Miss("entry for another key or version (ignored)");
        }
        let entry = stored.entry;
        if entry.expires_at <= now || entry.issued_at > now {
            Lookup::Miss("entry expired")
        } else if now < entry.fresh_until() {
            Lookup::Fresh(entry)
        } else {
            Lookup::Stale(entry)
        }
    }

    /// Writes the entry for `key`, replacing any previous one atomically.
    pub fn store(&self, key: &CacheKey, entry: &Entry) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let body = serde_json::to_vec(&EntryFile {
            version: VERSION,
            key: key.clone(),
            entry: entry.clone(),
        })
        .map_err(io::Error::other)?;
        let path = self.path(key);
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
        let write = || -> io::Result<()> {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&body)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOW: i64 = 1_800_000_000;

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ecr-cache-test-{}-{name}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn key(role: &str) -> CacheKey {
        CacheKey {
            registry: "123456789012.dkr.ecr.us-east-1.amazonaws.com".into(),
            region: "us-east-1".into(),
            role: role.into(),
            service_account: String::new(),
        }
    }

    fn entry(issued_at: i64, lifetime: i64) -> Entry {
        Entry {
            username: "AWS".into(),
            password: Secret::new("pw"),
            issued_at,
            expires_at: issued_at + lifetime,
        }
    }

    #[test]
    fn fresh_for_half_the_lifetime_then_stale_then_gone() {
        let dir = tempdir("life");
        let cache = Cache::new(dir.join("nested/cache"));
        let k = key("");
        assert_eq!(cache.lookup(&k, NOW), Lookup::Miss("no entry"));
        let e = entry(NOW, 12 * 3600);
        cache.store(&k, &e).unwrap();
        assert_eq!(cache.lookup(&k, NOW), Lookup::Fresh(e.clone()));
        assert_eq!(
            cache.lookup(&k, NOW + 6 * 3600 - 1),
            Lookup::Fresh(e.clone())
        );
        assert_eq!(cache.lookup(&k, NOW + 6 * 3600), Lookup::Stale(e.clone()));
        assert_eq!(
            cache.lookup(&k, NOW + 12 * 3600 - 1),
            Lookup::Stale(e.clone())
        );
        assert_eq!(
            cache.lookup(&k, NOW + 12 * 3600),
            Lookup::Miss("entry expired")
        );
        // A clock that went backwards does not make a future entry fresh.
        assert_eq!(cache.lookup(&k, NOW - 10), Lookup::Miss("entry expired"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_are_private_and_replaced_atomically() {
        let dir = tempdir("mode");
        let cache = Cache::new(&dir);
        let k = key("");
        cache.store(&k, &entry(NOW, 100)).unwrap();
        cache.store(&k, &entry(NOW, 200)).unwrap();
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![k.file_name()], "no temporary file left");
        let mode = fs::metadata(cache.path(&k)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(cache.lookup(&k, NOW), Lookup::Fresh(entry(NOW, 200)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_separate_registries_regions_roles_and_service_accounts() {
        let base = key("");
        let variants = [
            CacheKey {
                registry: "210987654321.dkr.ecr.us-east-1.amazonaws.com".into(),
                ..base.clone()
            },
            CacheKey {
                region: "us-west-2".into(),
                ..base.clone()
            },
            key("arn:aws:iam::111122223333:role/a"),
            CacheKey {
                role: "arn:aws:iam::111122223333:role/a".into(),
                service_account: "sub=system:serviceaccount:ns:b".into(),
                ..base.clone()
            },
        ];
        let mut names: Vec<String> = variants.iter().map(CacheKey::file_name).collect();
        names.push(base.file_name());
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 5);
        // Length prefixes: moving a character between parts changes the name.
        let a = CacheKey {
            registry: "ab".into(),
            region: "c".into(),
            ..base.clone()
        };
        let b = CacheKey {
            registry: "a".into(),
            region: "bc".into(),
            ..base
        };
        assert_ne!(a.file_name(), b.file_name());
    }

    #[test]
    fn corrupt_foreign_and_open_files_are_ignored_and_replaced() {
        let dir = tempdir("corrupt");
        let cache = Cache::new(&dir);
        let k = key("");
        cache.store(&k, &entry(NOW, 100)).unwrap();
        let path = cache.path(&k);

        fs::write(&path, b"{not json").unwrap();
        assert_eq!(
            cache.lookup(&k, NOW),
            Lookup::Miss("entry corrupt (ignored)")
        );
        fs::write(&path, b"").unwrap();
        assert_eq!(
            cache.lookup(&k, NOW),
            Lookup::Miss("entry corrupt (ignored)")
        );
        fs::write(&path, br#"{"version":1}"#).unwrap();
        assert_eq!(
            cache.lookup(&k, NOW),
            Lookup::Miss("entry corrupt (ignored)")
        );
        cache.store(&k, &entry(NOW, 100)).unwrap();
        assert!(matches!(cache.lookup(&k, NOW), Lookup::Fresh(_)));

        // The same bytes under another key's name (copied by hand) are not served.
        let other = key("arn:aws:iam::111122223333:role/a");
        fs::copy(&path, cache.path(&other)).unwrap();
        assert_eq!(
            cache.lookup(&other, NOW),
            Lookup::Miss("entry for another key or version (ignored)")
        );

        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            cache.lookup(&k, NOW),
            Lookup::Miss("entry not private to this user (ignored)")
        );
        cache.store(&k, &entry(NOW, 100)).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "replaced with a private file");
        assert!(matches!(cache.lookup(&k, NOW), Lookup::Fresh(_)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let dir = tempdir("unwritable");
        fs::write(&dir, b"a file, not a directory").unwrap();
        let cache = Cache::new(dir.join("sub"));
        assert!(cache.store(&key(""), &entry(NOW, 100)).is_err());
        assert_eq!(
            cache.lookup(&key(""), NOW),
            Lookup::Miss("entry unreadable")
        );
        fs::remove_file(&dir).unwrap();
    }
}
