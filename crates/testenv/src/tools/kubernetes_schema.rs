//! The schema-only stand-in for the hashicorp/kubernetes provider
//! (`crates/testenv/go-kubernetes-schema`): the Go module proxy refuses terraform-provider-kubernetes
//! v2.38.0, so the DVP layouts' takeover plans run against this provider. It also declares the two
//! resource types Deckhouse's own build of the provider adds, so that tofu can read Deckhouse's
//! DVP state (`STRATUS_KUBERNETES_STOCK=1` in its environment leaves them out), and answers the
//! `kubernetes_resource` data source from the apiserver its provider block names
//! (`STRATUS_KUBERNETES_NO_PARENT=1`: from none, every object absent). Built from its own
//! small Go module (terraform-plugin-go) into a filesystem mirror of its own, at the address and
//! version the layouts require, with a CLI config that installs only from that mirror. `main.go`
//! there says what it answers.
//!
//! Built on first use (about 15 s), cached under `$STRATUS_CACHE/opentofu/`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::stand_in::{Installed, StandIn};

/// The provider address the DVP layouts require, fully qualified.
pub const KUBERNETES_PROVIDER_ADDRESS: &str = "registry.opentofu.org/hashicorp/kubernetes";
/// The version the stand-in is mirrored as: the layouts' pin (`layouts/dvp/terraform_versions.yml`).
pub const KUBERNETES_PROVIDER_VERSION: &str = "2.38.0";
/// Set (to anything) in the provider's environment, the stand-in lacks Deckhouse's own types.
pub const STOCK_ENV: &str = "STRATUS_KUBERNETES_STOCK";
/// Set (to anything) in the provider's environment, the stand-in's `kubernetes_resource` data
/// source contacts no apiserver and finds nothing: the empty parent namespace of a first converge.
pub const NO_PARENT_ENV: &str = "STRATUS_KUBERNETES_NO_PARENT";

/// Bumped when the recipe (flags, layout of the mirror, CLI config) changes.
const RECIPE: &str = "kubernetes-schema-v1";
/// The files of the Go module; their content decides whether to rebuild.
const SOURCES: [&str; 6] = [
    "datasource.go",
    "go.mod",
    "go.sum",
    "main.go",
    "schema.go",
    "values.go",
];

/// The stand-in.
pub const STAND_IN: StandIn = StandIn {
    name: "kubernetes",
    address: KUBERNETES_PROVIDER_ADDRESS,
    version: KUBERNETES_PROVIDER_VERSION,
    module: "go-kubernetes-schema",
    sources: &SOURCES,
    recipe: RECIPE,
};

/// The installed stand-in.
pub type KubernetesSchemaProvider = Installed;

/// The Go module of the stand-in.
pub fn module_dir() -> PathBuf {
    STAND_IN.module_dir()
}

/// Makes sure the stand-in and its CLI config exist, building what is missing. Blocking; safe
/// to call from several processes at once.
pub fn ensure_kubernetes_schema_provider() -> Result<KubernetesSchemaProvider> {
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
