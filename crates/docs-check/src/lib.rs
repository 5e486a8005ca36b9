//! The documentation's own checks: nothing here watches or writes a cluster. It renders
//! `docs/src/performance.md` from `bench/results/*.json` ([`bench`]), reads the crate table of
//! `docs/src/architecture.md` ([`crates`]) and resolves every relative link and `#anchor` of the
//! docs and the README ([`links`]). The tests in `tests/docs.rs` hold the docs to the code.

pub mod bench;
pub mod crates;
pub mod links;

use std::path::{Path, PathBuf};

/// The repository root: the nearest directory holding `docs/` and `Cargo.lock` above
/// `$CARGO_MANIFEST_DIR` as the process runs (cargo sets it for `cargo test` and `cargo run`),
/// else above this crate as compiled. Build artifacts are shared between clones (one cache
/// outside every clone), so the compiled path alone can name a clone that is gone.
pub fn repo_root() -> PathBuf {
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    runtime
        .into_iter()
        .chain(std::iter::once(built))
        .find_map(|start| {
            start
                .ancestors()
                .find(|dir| dir.join("docs").is_dir() && dir.join("Cargo.lock").is_file())
                .map(Path::to_path_buf)
        })
        .expect("the repository root (a directory with docs/ and Cargo.lock) is above $CARGO_MANIFEST_DIR")
}
