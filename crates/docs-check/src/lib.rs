//! The documentation's own checks: nothing here watches or writes a cluster. It renders
//! `docs/src/performance.md` from `bench/results/*.json` ([`bench`]), reads the crate table of
//! `docs/src/architecture.md` ([`crates`]) and resolves every relative link and `#anchor` of the
//! docs and the README ([`links`]). The tests in `tests/docs.rs` hold the docs to the code.

pub mod bench;
pub mod crates;
pub mod links;

use std::path::PathBuf;

/// The repository root (two levels above this crate's manifest).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}
