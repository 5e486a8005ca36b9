//! The pin file of a cloud's layouts: the OpenTofu version, the `required_version` every module
//! declares, and each provider's source and exact version. Read from Deckhouse's
//! `terraform_versions.yml` (`opentofu: X`, one map per provider with `namespace`, `type`,
//! `version`; modules require `>= X`) where the cloud ships one, else from `versions.yml`.

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

/// One provider of `terraform_versions.yml`, as Deckhouse writes it (other keys are ignored).
#[derive(Debug, Clone, Deserialize)]
struct DeckhouseProvider {
    namespace: String,
    #[serde(rename = "type")]
    kind: String,
    version: String,
}

impl Versions {
    /// The file name inside `layouts/<cloud>/`.
    pub const FILE: &'static str = "versions.yml";
    /// Deckhouse's pin file inside `layouts/<cloud>/`; preferred when present.
    pub const DECKHOUSE_FILE: &'static str = "terraform_versions.yml";

    /// The pin file a cloud directory ships: `terraform_versions.yml`, else `versions.yml`.
    pub fn file_name(cloud_dir: &Path) -> &'static str {
        if cloud_dir.join(Self::DECKHOUSE_FILE).is_file() {
            Self::DECKHOUSE_FILE
        } else {
            Self::FILE
        }
    }

    /// Reads `<cloud_dir>/terraform_versions.yml` (Deckhouse's shape) or `versions.yml`.
    pub fn load(cloud_dir: &Path) -> Result<Versions, VersionsError> {
        if Self::file_name(cloud_dir) == Self::DECKHOUSE_FILE {
            return Self::load_deckhouse(&cloud_dir.join(Self::DECKHOUSE_FILE));
        }
        let path = cloud_dir.join(Self::FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| VersionsError::Read {
            path: path.clone(),
            source,
        })?;
        serde_yaml::from_str(&text).map_err(|source| VersionsError::Parse { path, source })
    }
}

impl Versions {
    fn load_deckhouse(path: &Path) -> Result<Versions, VersionsError> {
        let text = std::fs::read_to_string(path).map_err(|source| VersionsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_deckhouse(&text).map_err(|source| VersionsError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Parses Deckhouse's `terraform_versions.yml`: `opentofu` (or `terraform`) and a map per
    /// provider; a key whose value is not a provider map is skipped.
    pub fn parse_deckhouse(text: &str) -> Result<Versions, serde_yaml::Error> {
        let doc: BTreeMap<String, serde_yaml::Value> = serde_yaml::from_str(text)?;
        let tool = doc
            .get("opentofu")
            .or_else(|| doc.get("terraform"))
            .cloned()
            .unwrap_or(serde_yaml::Value::Null);
        let version: String = serde_yaml::from_value(tool)?;
        let mut providers = BTreeMap::new();
        for (name, value) in &doc {
            if !value.is_mapping() {
                continue;
            }
            let p: DeckhouseProvider = serde_yaml::from_value(value.clone())?;
            providers.insert(
                name.clone(),
                ProviderVersion {
                    source: format!("{}/{}", p.namespace, p.kind),
                    version: p.version,
                },
            );
        }
        Ok(Versions {
            opentofu: OpenTofuVersion {
                required_version: format!(">= {version}"),
                version,
            },
            providers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deckhouse_pin_file_names_tool_and_providers() {
        let v = Versions::parse_deckhouse(
            "opentofu: 1.9.4\nopenstack:\n  namespace: terraform-provider-openstack\n  type: openstack\n  version: 1.54.1\n  useOpentofu: true\n",
        )
        .unwrap();
        assert_eq!(v.opentofu.version, "1.9.4");
        assert_eq!(v.opentofu.required_version, ">= 1.9.4");
        assert_eq!(
            v.providers["openstack"],
            ProviderVersion {
                source: "terraform-provider-openstack/openstack".into(),
                version: "1.54.1".into()
            }
        );
        assert!(Versions::parse_deckhouse("opentofu: 1.9.4\nx:\n  type: y\n").is_err());
    }
}
