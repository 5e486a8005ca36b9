//! A scratch copy of `layouts/` in a temporary directory, so `tofu init` (lock files, `.terraform`,
//! state) never writes into the repository and a test may break a copy on purpose.

use std::path::{Path, PathBuf};

/// The copy; removed on drop.
#[derive(Debug)]
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    /// Copies `layouts` (symlinks stay symlinks, so shared variable files stay shared).
    pub fn copy(layouts: &Path) -> std::io::Result<Workspace> {
        let dir = tempfile::Builder::new()
            .prefix("stratus-layouts-")
            .tempdir()?;
        copy_tree(layouts, &dir.path().join("layouts"))?;
        Ok(Workspace { dir })
    }

    /// The copied `layouts/` directory.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("layouts")
    }

    /// A scratch file path inside the workspace (outside `layouts/`).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        // Never carry a developer's local tofu state into the scratch copy.
        if name == ".terraform" || name == ".terraform.lock.hcl" || name == "terraform.tfstate" {
            continue;
        }
        let target = to.join(&name);
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
