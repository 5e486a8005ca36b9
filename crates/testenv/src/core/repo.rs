//! Where the repository is, found when the program runs rather than when it was compiled: build
//! artifacts are shared between clones (one cache outside every clone), so a path baked in at
//! compile time can name a clone that is gone.

use std::path::{Path, PathBuf};

/// A file only the Stratus repository root has, relative to it.
const MARKER: &str = "crates/testenv/go/go.mod";

/// The first of `start` and its ancestors that holds [`MARKER`].
fn root_above(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(MARKER).is_file())
        .map(Path::to_path_buf)
}

/// The repository root: `$STRATUS_REPO`, else the nearest root above the working directory, else
/// above `$CARGO_MANIFEST_DIR` (set by `cargo run` / `cargo test`), else where this crate was
/// compiled.
pub fn repo_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRATUS_REPO") {
        return PathBuf::from(dir);
    }
    let runtime = [
        std::env::current_dir().ok(),
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
    ];
    runtime
        .iter()
        .flatten()
        .find_map(|dir| root_above(dir))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_root_from_any_directory_below_it() {
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo test sets it");
        let above_manifest = Path::new(&manifest).join("../..");
        let root = root_above(&above_manifest.join("bins/cloud-controller-manager/src")).unwrap();
        assert!(root.join(MARKER).is_file());
        assert_eq!(
            root.canonicalize().unwrap(),
            above_manifest.canonicalize().unwrap()
        );
        assert_eq!(root_above(Path::new("/")), None);
    }
}
