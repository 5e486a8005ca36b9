//! The schema-only stand-in for the hashicorp/kubernetes provider
//! (`crates/testenv/go-kubernetes-schema`): the Go module proxy refuses terraform-provider-kubernetes
//! v2.38.0, so the DVP layouts' takeover plans run against this provider. It also declares the two
//! resource types Deckhouse's own build of the provider adds, so that tofu can read Deckhouse's
//! DVP state (`STRATUS_KUBERNETES_STOCK=1` in its environment leaves them out). Built from its own
//! small Go module (terraform-plugin-go) into a filesystem mirror of its own, at the address and
//! version the layouts require, with a CLI config that installs only from that mirror. `main.go`
//! there says what it answers.
//!
//! Built on first use (about 15 s), cached under `$STRATUS_CACHE/opentofu/`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{go_build, go_platform, lock, stamp_matches};
use crate::tools::install::{fnv1a64, Paths};

/// The provider address the DVP layouts require, fully qualified.
pub const KUBERNETES_PROVIDER_ADDRESS: &str = "registry.opentofu.org/hashicorp/kubernetes";
/// The version the stand-in is mirrored as: the layouts' pin (`layouts/dvp/terraform_versions.yml`).
pub const KUBERNETES_PROVIDER_VERSION: &str = "2.38.0";
/// Set (to anything) in the provider's environment, the stand-in lacks Deckhouse's own types.
pub const STOCK_ENV: &str = "STRATUS_KUBERNETES_STOCK";

/// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
const RECIPE: &str = "kubernetes-schema-v1";
/// The files of the Go module; their content decides whether to rebuild.
const SOURCES: [&str; 5] = ["go.mod", "go.sum", "main.go", "schema.go", "values.go"];

/// The installed stand-in.
#[derive(Debug, Clone)]
pub struct KubernetesSchemaProvider {
    /// The filesystem mirror holding it.
    pub mirror: PathBuf,
    /// A CLI config (`TF_CLI_CONFIG_FILE`) that installs hashicorp/kubernetes from `mirror` only.
    pub cli_config: PathBuf,
}

/// The Go module of the stand-in.
pub fn module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-kubernetes-schema")
}

/// Makes sure the stand-in and its CLI config exist, building what is missing. Blocking; safe
/// to call from several processes at once.
pub fn ensure_kubernetes_schema_provider() -> Result<KubernetesSchemaProvider> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "kubernetes-schema-provider")?;
    let root = paths.cache.join("opentofu");
    let mirror = root.join("mirror-kubernetes-schema");
    let cli_config = root.join("cli-kubernetes-schema.tfrc");
    let module = module_dir();
    let mut source = String::new();
    for file in SOURCES {
        let path = module.join(file);
        source.push_str(
            &fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
        );
        source.push('\0');
    }
    let binary = mirror
        .join(KUBERNETES_PROVIDER_ADDRESS)
        .join(KUBERNETES_PROVIDER_VERSION)
        .join(go_platform())
        .join(format!(
            "terraform-provider-kubernetes_v{KUBERNETES_PROVIDER_VERSION}"
        ));
    let stamp = root.join(".stamp-kubernetes-schema-provider");
    let value = format!("{RECIPE} {:016x}\n", fnv1a64(source.as_bytes()));
    if !stamp_matches(&stamp, &value, &[&binary]) {
        go_build(
            &paths,
            &module,
            ".",
            "-s -w",
            &binary,
            "the hashicorp/kubernetes stand-in",
        )?;
        fs::write(&stamp, &value).with_context(|| format!("writing {}", stamp.display()))?;
    }
    let config = cli_config_text(&mirror);
    if fs::read_to_string(&cli_config).ok().as_deref() != Some(config.as_str()) {
        fs::write(&cli_config, &config)
            .with_context(|| format!("writing {}", cli_config.display()))?;
    }
    Ok(KubernetesSchemaProvider { mirror, cli_config })
}

/// A CLI config whose only installation method is the stand-in's mirror.
pub fn cli_config_text(mirror: &Path) -> String {
    format!(
        "# Written by stratus-testenv: hashicorp/kubernetes is the schema-only stand-in of this mirror.\n\
         provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"{KUBERNETES_PROVIDER_ADDRESS}\"]\n  }}\n}}\n",
        mirror.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_config_names_only_the_stand_in_mirror() {
        let text = cli_config_text(Path::new("/cache/opentofu/mirror-kubernetes-schema"));
        assert!(
            text.contains("path    = \"/cache/opentofu/mirror-kubernetes-schema\""),
            "{text}"
        );
        assert!(text.contains(KUBERNETES_PROVIDER_ADDRESS), "{text}");
        assert!(!text.contains("direct"), "{text}");
    }

    #[test]
    fn every_go_file_of_the_stand_in_decides_the_rebuild() {
        let mut go_files: Vec<String> = fs::read_dir(module_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".go") || n.starts_with("go."))
            .collect();
        go_files.sort();
        let mut listed: Vec<String> = SOURCES.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(go_files, listed);
        let main = fs::read_to_string(module_dir().join("main.go")).unwrap();
        assert!(main.contains("tf5server.Serve"));
    }
}
