//! OpenTofu and the OpenStack provider, built from their Go modules: `tofu` (the
//! `github.com/opentofu/opentofu` module carries a `replace` directive, so it is built inside a
//! copy of the module) and `terraform-provider-openstack` in a filesystem mirror, with a CLI
//! config that installs providers from that mirror only (no direct installation, no network).
//!
//! Built on first use by the layout checks, cached under `$STRATUS_CACHE/opentofu/`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{go_build, go_platform, lock, module_source_copy, progress, stamp_matches};
use crate::tools::install::Paths;

/// The OpenTofu Go module.
pub const OPENTOFU_MODULE: &str = "github.com/opentofu/opentofu";
/// The exact OpenTofu version built.
pub const OPENTOFU_VERSION: &str = "v1.12.6";
/// The OpenStack provider's Go module.
pub const OPENSTACK_PROVIDER_MODULE: &str =
    "github.com/terraform-provider-openstack/terraform-provider-openstack";
/// The exact provider version built (Deckhouse's pin).
pub const OPENSTACK_PROVIDER_VERSION: &str = "v1.54.1";
/// The provider's address as layouts require it (`required_providers`), fully qualified.
pub const OPENSTACK_PROVIDER_ADDRESS: &str =
    "registry.opentofu.org/terraform-provider-openstack/openstack";

/// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
const RECIPE: &str = "opentofu-v1";

/// The installed OpenTofu.
#[derive(Debug, Clone)]
pub struct OpenTofu {
    /// The `tofu` binary.
    pub tofu: PathBuf,
    /// The filesystem mirror holding the OpenStack provider.
    pub mirror: PathBuf,
    /// A CLI config (`TF_CLI_CONFIG_FILE`) that installs providers from `mirror` only.
    pub cli_config: PathBuf,
    /// Build times of this call (empty when everything was cached).
    pub built: Vec<(String, Duration)>,
}

/// Makes sure `tofu`, the provider mirror and the CLI config exist, building what is missing.
/// Blocking; safe to call from several processes at once.
pub fn ensure_opentofu() -> Result<OpenTofu> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "opentofu")?;
    let root = paths.cache.join("opentofu");
    let tofu = root.join("bin/tofu");
    let mirror = root.join("mirror");
    let cli_config = root.join("cli.tfrc");
    let mut built = Vec::new();

    let tofu_stamp = root.join(".stamp-tofu");
    let tofu_value = format!("{RECIPE} {OPENTOFU_MODULE}@{OPENTOFU_VERSION}\n");
    if !stamp_matches(&tofu_stamp, &tofu_value, &[&tofu]) {
        let src = module_source_copy(&paths, OPENTOFU_MODULE, OPENTOFU_VERSION)?;
        // `version.dev=no` makes `tofu version` report the release, not `-dev`, so
        // `required_version` constraints match it.
        let took = go_build(
            &paths,
            &src,
            "./cmd/tofu",
            "-s -w -X github.com/opentofu/opentofu/version.dev=no",
            &tofu,
            &format!("OpenTofu {OPENTOFU_VERSION}"),
        )?;
        built.push(("tofu".to_string(), took));
        fs::write(&tofu_stamp, &tofu_value)?;
    }

    let version = OPENSTACK_PROVIDER_VERSION.trim_start_matches('v');
    let provider = mirror
        .join(OPENSTACK_PROVIDER_ADDRESS)
        .join(version)
        .join(go_platform())
        .join(format!("terraform-provider-openstack_v{version}"));
    let provider_stamp = root.join(".stamp-provider-openstack");
    let provider_value =
        format!("{RECIPE} {OPENSTACK_PROVIDER_MODULE}@{OPENSTACK_PROVIDER_VERSION}\n");
    if !stamp_matches(&provider_stamp, &provider_value, &[&provider]) {
        let src = module_source_copy(
            &paths,
            OPENSTACK_PROVIDER_MODULE,
            OPENSTACK_PROVIDER_VERSION,
        )?;
        let took = go_build(
            &paths,
            &src,
            ".",
            "-s -w",
            &provider,
            &format!("terraform-provider-openstack {OPENSTACK_PROVIDER_VERSION}"),
        )?;
        built.push(("terraform-provider-openstack".to_string(), took));
        fs::write(&provider_stamp, &provider_value)?;
    }

    let config = cli_config_text(&mirror);
    if fs::read_to_string(&cli_config).ok().as_deref() != Some(config.as_str()) {
        fs::write(&cli_config, &config)
            .with_context(|| format!("writing {}", cli_config.display()))?;
    }
    if !built.is_empty() {
        let total: Duration = built.iter().map(|(_, d)| *d).sum();
        progress(&format!(
            "OpenTofu and its OpenStack provider ready after {} s of building",
            total.as_secs()
        ));
    }
    Ok(OpenTofu {
        tofu,
        mirror,
        cli_config,
        built,
    })
}

/// A CLI config whose only installation method is the filesystem mirror, and only for the
/// OpenStack provider: any other provider (or a network install) fails `tofu init`.
pub fn cli_config_text(mirror: &Path) -> String {
    format!(
        "# Written by stratus-testenv: providers come from the local mirror only.\n\
         provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"{OPENSTACK_PROVIDER_ADDRESS}\"]\n  }}\n}}\n",
        mirror.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_config_names_only_the_mirror() {
        let text = cli_config_text(Path::new("/cache/opentofu/mirror"));
        assert!(text.contains("filesystem_mirror"), "{text}");
        assert!(
            text.contains("path    = \"/cache/opentofu/mirror\""),
            "{text}"
        );
        assert!(!text.contains("direct"), "{text}");
    }
}
