//! `layouts/<cloud>/versions.yml`: the OpenTofu version the layouts are checked with, the
//! `required_version` every module declares, and each provider's source and exact version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The versions file of one cloud.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Versions {
    pub opentofu: OpenTofuVersion,
    pub providers: BTreeMap<String, ProviderVersion>,
}

/// `opentofu:`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct OpenTofuVersion {
    /// The release the layouts are validated with.
    pub version: String,
    /// The constraint every module's `required_version` repeats.
    pub required_version: String,
}

/// One provider.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ProviderVersion {
    pub source: String,
    pub version: String,
}

/// Why a versions file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VersionsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid versions file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml::Error,
    },
}

impl Versions {
    /// The file name inside `layouts/<cloud>/`.
    pub const FILE: &'static str = "versions.yml";

    /// Reads `<cloud_dir>/versions.yml`.
    pub fn load(cloud_dir: &Path) -> Result<Versions, VersionsError> {
        let path = cloud_dir.join(Self::FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| VersionsError::Read {
            path: path.clone(),
            source,
        })?;
        serde_yaml::from_str(&text).map_err(|source| VersionsError::Parse { path, source })
    }
}
