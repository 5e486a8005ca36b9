//! The toolchain file of one cloud's layouts: the OpenTofu version the layouts are checked with,
//! the `required_version` every module declares, and each provider's source and exact version.
//!
//! One file per cloud: `terraform_versions.yml` in the shape of Deckhouse's own pin file (one
//! top-level entry per provider with `namespace`, `type`, `version`, artifact names and
//! `useOpentofu`, beside `opentofu:`), or the older `versions.yml` (`opentofu:` and
//! `providers: {name: {source, version}}`) where a cloud still has it.

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

/// One provider of a Deckhouse-shaped `terraform_versions.yml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeckhouseProvider {
    /// The registry namespace (`hashicorp`).
    pub namespace: String,
    /// The provider type (`aws`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its exact version.
    pub version: String,
    /// The artifact built or fetched.
    pub artifact: String,
    /// The binary inside the artifact.
    pub artifact_binary: String,
    /// The binary's name in the plugin directory.
    pub destination_binary: String,
    /// Whether OpenTofu (not Terraform) runs the layouts.
    pub use_opentofu: bool,
}

#[derive(Deserialize)]
struct DeckhouseShape {
    opentofu: OpenTofuVersion,
    #[serde(flatten)]
    providers: BTreeMap<String, DeckhouseProvider>,
}

impl Versions {
    /// The file name inside `layouts/<cloud>/`, in Deckhouse's shape.
    pub const FILE: &'static str = "terraform_versions.yml";
    /// The older file name, read when a cloud has no [`Versions::FILE`].
    pub const LEGACY_FILE: &'static str = "versions.yml";

    /// Reads `<cloud_dir>/terraform_versions.yml`, else `<cloud_dir>/versions.yml`.
    pub fn load(cloud_dir: &Path) -> Result<Versions, VersionsError> {
        let deckhouse = cloud_dir.join(Self::FILE);
        if deckhouse.is_file() {
            let text = read(&deckhouse)?;
            return Self::parse_deckhouse(&text).map_err(|source| VersionsError::Parse {
                path: deckhouse,
                source,
            });
        }
        let path = cloud_dir.join(Self::LEGACY_FILE);
        let text = read(&path)?;
        serde_yaml::from_str(&text).map_err(|source| VersionsError::Parse { path, source })
    }

    /// Parses a Deckhouse-shaped pin file: each provider's source is `<namespace>/<type>`.
    pub fn parse_deckhouse(text: &str) -> Result<Versions, serde_yaml::Error> {
        let shape: DeckhouseShape = serde_yaml::from_str(text)?;
        Ok(Versions {
            opentofu: shape.opentofu,
            providers: shape
                .providers
                .into_iter()
                .map(|(name, p)| {
                    let source = format!("{}/{}", p.namespace, p.kind);
                    (
                        name,
                        ProviderVersion {
                            source,
                            version: p.version,
                        },
                    )
                })
                .collect(),
        })
    }
}

fn read(path: &Path) -> Result<String, VersionsError> {
    std::fs::read_to_string(path).map_err(|source| VersionsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECKHOUSE_SHAPED: &str = "opentofu:\n  version: 1.12.6\n  required_version: \">= 1.9.0\"\naws:\n  namespace: hashicorp\n  type: aws\n  version: 5.100.0\n  artifact: terraform-provider-aws\n  artifactBinary: terraform-provider-aws\n  destinationBinary: terraform-provider-aws\n  useOpentofu: true\n";

    #[test]
    fn a_deckhouse_shaped_file_names_the_provider_source_and_version() {
        let v = Versions::parse_deckhouse(DECKHOUSE_SHAPED).unwrap();
        assert_eq!(v.opentofu.version, "1.12.6");
        assert_eq!(
            v.providers["aws"],
            ProviderVersion {
                source: "hashicorp/aws".into(),
                version: "5.100.0".into()
            }
        );
    }

    #[test]
    fn a_provider_entry_missing_a_field_or_with_an_unknown_one_is_refused() {
        let missing = DECKHOUSE_SHAPED.replace("  useOpentofu: true\n", "");
        assert!(Versions::parse_deckhouse(&missing).is_err());
        let unknown = DECKHOUSE_SHAPED.replace("useOpentofu", "useOpenTofu");
        assert!(Versions::parse_deckhouse(&unknown).is_err());
    }

    #[test]
    fn the_aws_layouts_ship_the_deckhouse_shaped_file() {
        let cloud = crate::catalog::layouts_root(&crate::catalog::repo_root()).join("aws");
        assert!(cloud.join(Versions::FILE).is_file());
        let v = Versions::load(&cloud).unwrap();
        assert_eq!(v.providers["aws"].source, "hashicorp/aws");
    }
}
