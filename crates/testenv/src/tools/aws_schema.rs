//! The schema-only stand-in for the hashicorp/aws provider (`crates/testenv/go-aws-schema`):
//! the Go module proxy serves no terraform-provider-aws v5 release, so the AWS layouts are
//! validated, tested and planned against this provider. It is built from its own small Go module
//! into a filesystem mirror of its own, at the address and version the layouts require, with a
//! CLI config that installs only from that mirror. `main.go` there says what it answers.
//!
//! Built on first use (about 20 s), cached under `$STRATUS_CACHE/opentofu/`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::stand_in::{Installed, StandIn};

/// The provider address the AWS layouts require, fully qualified.
pub const AWS_PROVIDER_ADDRESS: &str = "registry.opentofu.org/hashicorp/aws";
/// The version the stand-in is mirrored as: the layouts' pin (`layouts/aws/terraform_versions.yml`).
pub const AWS_PROVIDER_VERSION: &str = "5.100.0";

/// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
const RECIPE: &str = "aws-schema-v1";

/// The stand-in.
pub const STAND_IN: StandIn = StandIn {
    name: "aws",
    address: AWS_PROVIDER_ADDRESS,
    version: AWS_PROVIDER_VERSION,
    module: "go-aws-schema",
    sources: &["go.mod", "go.sum", "main.go"],
    recipe: RECIPE,
};

/// The installed stand-in.
pub type AwsSchemaProvider = Installed;

/// The Go module of the stand-in.
pub fn module_dir() -> PathBuf {
    STAND_IN.module_dir()
}

/// Makes sure the stand-in and its CLI config exist, building what is missing. Blocking; safe
/// to call from several processes at once.
pub fn ensure_aws_schema_provider() -> Result<AwsSchemaProvider> {
    STAND_IN.ensure()
}

/// A CLI config whose only installation method is the stand-in's mirror.
pub fn cli_config_text(mirror: &Path) -> String {
    STAND_IN.cli_config_text(mirror)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
