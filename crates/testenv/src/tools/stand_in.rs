//! Building a schema-only stand-in provider (the hashicorp/aws and hashicorp/kubernetes ones the
//! Go module proxy does not serve) from its small Go module into a filesystem mirror of its own,
//! at the address and version the layouts require, with a CLI config that installs only from
//! that mirror, all three named after a hash of its sources and recipe (checkouts with different
//! sources sharing the cache keep their own builds). Safe from several processes at once.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{go_build, go_platform, lock, stamp_matches};
use crate::tools::install::{fnv1a64, Paths};

/// One stand-in provider.
#[derive(Debug, Clone, Copy)]
pub struct StandIn {
    /// Its short name (`aws`): the mirror, CLI config, lock and stamp are named after it.
    pub name: &'static str,
    /// The provider address, fully qualified (`registry.opentofu.org/hashicorp/aws`).
    pub address: &'static str,
    /// The version it is mirrored as (the layouts' pin).
    pub version: &'static str,
    /// Its Go module, under `crates/testenv`.
    pub module: &'static str,
    /// The module's files whose content decides a rebuild.
    pub sources: &'static [&'static str],
    /// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
    pub recipe: &'static str,
}

/// An installed stand-in.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The filesystem mirror holding it.
    pub mirror: PathBuf,
    /// A CLI config (`TF_CLI_CONFIG_FILE`) that installs the provider from `mirror` only.
    pub cli_config: PathBuf,
}

impl StandIn {
    /// The Go module of the stand-in.
    pub fn module_dir(&self) -> PathBuf {
        crate::repo_root().join("crates/testenv").join(self.module)
    }

    /// Makes sure the stand-in and its CLI config exist, building what is missing. Blocking.
    pub fn ensure(&self) -> Result<Installed> {
        let paths = Paths::from_env()?;
        let _lock = lock(&paths, &format!("{}-schema-provider", self.name))?;
        let root = paths.cache.join("opentofu");
        let module = self.module_dir();
        let mut source = String::new();
        for file in self.sources {
            let path = module.join(file);
            source.push_str(
                &fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?,
            );
            source.push('\0');
        }
        // The mirror, CLI config and stamp are named after the recipe and the sources: checkouts
        // with different sources (worktrees sharing the cache) each keep their own build.
        let id = fnv1a64(format!("{}\0{source}", self.recipe).as_bytes());
        let mirror = root.join(format!("mirror-{}-schema-{id:016x}", self.name));
        let cli_config = root.join(format!("cli-{}-schema-{id:016x}.tfrc", self.name));
        let kind = self.address.rsplit('/').next().unwrap_or(self.name);
        let binary = mirror
            .join(self.address)
            .join(self.version)
            .join(go_platform())
            .join(format!("terraform-provider-{kind}_v{}", self.version));
        let stamp = root.join(format!(".stamp-{}-schema-provider-{id:016x}", self.name));
        let value = format!("{} {:016x}\n", self.recipe, fnv1a64(source.as_bytes()));
        if !stamp_matches(&stamp, &value, &[&binary]) {
            let what = format!("the {} stand-in", self.address);
            go_build(&paths, &module, ".", "-s -w", &binary, &what)?;
            fs::write(&stamp, &value).with_context(|| format!("writing {}", stamp.display()))?;
        }
        let config = self.cli_config_text(&mirror);
        if fs::read_to_string(&cli_config).ok().as_deref() != Some(config.as_str()) {
            fs::write(&cli_config, &config)
                .with_context(|| format!("writing {}", cli_config.display()))?;
        }
        Ok(Installed { mirror, cli_config })
    }

    /// A CLI config whose only installation method is the stand-in's mirror.
    pub fn cli_config_text(&self, mirror: &Path) -> String {
        format!(
            "# Written by stratus-testenv: {} is the schema-only stand-in of this mirror.\n\
             provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"{}\"]\n  }}\n}}\n",
            self.address.trim_start_matches("registry.opentofu.org/"),
            mirror.display(),
            self.address
        )
    }
}
