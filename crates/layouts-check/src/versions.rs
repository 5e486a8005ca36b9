//! `layouts/<cloud>/versions.yml`: the OpenTofu version the layouts are checked with, the
//! `required_version` every module declares, and each provider's source and exact version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The versions file of one cloud.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Versions {
    /// The OpenTofu version.
    pub opentofu: OpenTofuVersion,
    /// Providers by name.
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
    /// The provider's address.
    pub source: String,
    /// Its exact version.
    pub version: String,
}

/// Why a versions file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VersionsError {
    #[error("reading {path}: {source}")]
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("{path} is not a valid versions file: {source}")]
    /// The file is not the expected YAML.
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
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
