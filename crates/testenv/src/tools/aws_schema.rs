//! The schema-only stand-in for the hashicorp/aws provider (`crates/testenv/go-aws-schema`):
//! the Go module proxy serves no terraform-provider-aws v5 release, so the AWS layouts are
//! validated, tested and planned against this provider. It is built from its own small Go module
//! into a filesystem mirror of its own, at the address and version the layouts require, with a
//! CLI config that installs only from that mirror. `main.go` there says what it answers.
//!
//! Built on first use (about 20 s), cached under `$STRATUS_CACHE/opentofu/`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{go_build, go_platform, lock, stamp_matches};
use crate::tools::install::{fnv1a64, Paths};

/// The provider address the AWS layouts require, fully qualified.
pub const AWS_PROVIDER_ADDRESS: &str = "registry.opentofu.org/hashicorp/aws";
/// The version the stand-in is mirrored as: the layouts' pin (`layouts/aws/terraform_versions.yml`).
pub const AWS_PROVIDER_VERSION: &str = "5.100.0";

/// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
const RECIPE: &str = "aws-schema-v1";

/// The installed stand-in.
#[derive(Debug, Clone)]
pub struct AwsSchemaProvider {
    /// The filesystem mirror holding it.
    pub mirror: PathBuf,
    /// A CLI config (`TF_CLI_CONFIG_FILE`) that installs hashicorp/aws from `mirror` only.
    pub cli_config: PathBuf,
}

/// The Go module of the stand-in.
pub fn module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-aws-schema")
}

/// Makes sure the stand-in and its CLI config exist, building what is missing. Blocking; safe
/// to call from several processes at once.
pub fn ensure_aws_schema_provider() -> Result<AwsSchemaProvider> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "aws-schema-provider")?;
    let root = paths.cache.join("opentofu");
    let mirror = root.join("mirror-aws-schema");
    let cli_config = root.join("cli-aws-schema.tfrc");
    let module = module_dir();
    let mut source = String::new();
    for file in ["go.mod", "go.sum", "main.go"] {
        let path = module.join(file);
        source.push_str(
            &fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
        );
        source.push('\0');
    }
    let binary = mirror
        .join(AWS_PROVIDER_ADDRESS)
        .join(AWS_PROVIDER_VERSION)
        .join(go_platform())
        .join(format!("terraform-provider-aws_v{AWS_PROVIDER_VERSION}"));
    let stamp = root.join(".stamp-aws-schema-provider");
    let value = format!("{RECIPE} {:016x}\n", fnv1a64(source.as_bytes()));
    if !stamp_matches(&stamp, &value, &[&binary]) {
        go_build(
            &paths,
            &module,
            ".",
            "-s -w",
            &binary,
            "the hashicorp/aws stand-in",
        )?;
        fs::write(&stamp, &value).with_context(|| format!("writing {}", stamp.display()))?;
    }
    let config = cli_config_text(&mirror);
    if fs::read_to_string(&cli_config).ok().as_deref() != Some(config.as_str()) {
        fs::write(&cli_config, &config)
            .with_context(|| format!("writing {}", cli_config.display()))?;
    }
    Ok(AwsSchemaProvider { mirror, cli_config })
}

/// A CLI config whose only installation method is the stand-in's mirror.
pub fn cli_config_text(mirror: &Path) -> String {
    format!(
        "# Written by stratus-testenv: hashicorp/aws is the schema-only stand-in of this mirror.\n\
         provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"{AWS_PROVIDER_ADDRESS}\"]\n  }}\n}}\n",
        mirror.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_config_names_only_the_stand_in_mirror() {
        let text = cli_config_text(Path::new("/cache/opentofu/mirror-aws-schema"));
        assert!(
            text.contains("path    = \"/cache/opentofu/mirror-aws-schema\""),
            "{text}"
        );
        assert!(text.contains(AWS_PROVIDER_ADDRESS), "{text}");
        assert!(!text.contains("direct"), "{text}");
    }

    #[test]
    fn the_stand_in_module_is_in_the_checkout() {
        let main = module_dir().join("main.go");
        let text = fs::read_to_string(&main).unwrap();
        assert!(text.contains("plugin.Serve"), "{}", main.display());
    }
}
