//! What the repository must ship: the clouds, their layouts and the three modules of each.

use std::path::{Path, PathBuf};

/// One cloud's layouts.
#[derive(Debug, Clone, Copy)]
pub struct CloudSpec {
    /// The folder under `layouts/`.
    pub cloud: &'static str,
    /// The provider's local name in `required_providers` and the pin file.
    pub provider: &'static str,
    /// `(folder, layout name as the cluster configuration spells it)`.
    pub layouts: &'static [(&'static str, &'static str)],
    /// Outputs every base-infrastructure module must have besides `cloud_discovery_data`.
    pub base_outputs: &'static [&'static str],
}

/// Every cloud and layout the issue asks for.
pub const CLOUDS: &[CloudSpec] = &[
    CloudSpec {
        cloud: "aws",
        provider: "aws",
        layouts: &[
            ("without-nat", "WithoutNAT"),
            ("with-nat", "WithNAT"),
            ("standard", "Standard"),
        ],
        base_outputs: &["node_network_cidr"],
    },
    CloudSpec {
        cloud: "openstack",
        provider: "openstack",
        layouts: &[
            ("standard", "Standard"),
            ("standard-with-no-router", "StandardWithNoRouter"),
            ("simple", "Simple"),
            ("simple-with-internal-network", "SimpleWithInternalNetwork"),
        ],
        base_outputs: &["node_network_cidr"],
    },
    CloudSpec {
        cloud: "dvp",
        provider: "kubernetes",
        layouts: &[("standard", "Standard")],
        base_outputs: &[],
    },
];

/// The three modules of every layout.
pub const LAYOUT_MODULES: [&str; 3] = ["base-infrastructure", "master-node", "static-node"];

/// The variables dhctl passes to every layout module.
pub const DHCTL_VARIABLES: [&str; 6] = [
    "clusterConfiguration",
    "providerClusterConfiguration",
    "clusterUUID",
    "nodeIndex",
    "cloudConfig",
    "nodeGroupName",
];

/// Outputs dhctl reads from a layout module.
pub fn required_outputs(spec: &CloudSpec, module: &str) -> Vec<&'static str> {
    match module {
        "base-infrastructure" => {
            let mut out = vec!["cloud_discovery_data"];
            out.extend_from_slice(spec.base_outputs);
            out
        }
        "master-node" => vec![
            "master_ip_address_for_ssh",
            "node_internal_ip_address",
            "kubernetes_data_device_path",
        ],
        _ => vec!["node_internal_ip_address"],
    }
}

/// The repository root: the nearest directory holding `layouts/` and `Cargo.lock` above the
/// package cargo runs the tests of (read at run time, so that a test binary built in another
/// checkout sharing the target directory still reads this one), else above this crate as built.
pub fn repo_root() -> PathBuf {
    let runtime = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    runtime
        .into_iter()
        .chain(std::iter::once(built))
        .find_map(|start| {
            start
                .ancestors()
                .find(|dir| dir.join("layouts").is_dir() && dir.join("Cargo.lock").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `layouts/` of a repository (or of a scratch copy).
pub fn layouts_root(repo: &Path) -> PathBuf {
    repo.join("layouts")
}

/// `<root>/<cloud>/layouts/<layout>/<module>`.
pub fn layout_module_dir(root: &Path, cloud: &str, layout: &str, module: &str) -> PathBuf {
    root.join(cloud).join("layouts").join(layout).join(module)
}

/// `<root>/<cloud>/terraform-modules/<name>`.
pub fn shared_module_dir(root: &Path, cloud: &str, name: &str) -> PathBuf {
    root.join(cloud).join("terraform-modules").join(name)
}

/// The shared modules of a cloud, sorted: each directory of `terraform-modules/` and each module
/// nested in one (a subdirectory holding `.tf` files, such as `cluster-config/typed`).
pub fn shared_modules(root: &Path, cloud: &str) -> std::io::Result<Vec<PathBuf>> {
    let subdirs = |dir: &Path| -> std::io::Result<Vec<PathBuf>> {
        Ok(std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_dir()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect())
    };
    let has_tf = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.path().extension().is_some_and(|x| x == "tf"))
        })
    };
    let mut dirs = Vec::new();
    for dir in subdirs(&root.join(cloud).join("terraform-modules"))? {
        let nested: Vec<PathBuf> = subdirs(&dir)?.into_iter().filter(|d| has_tf(d)).collect();
        dirs.push(dir);
        dirs.extend(nested);
    }
    dirs.sort();
    Ok(dirs)
}

/// Every layout module and shared module of a cloud.
pub fn all_modules(root: &Path, spec: &CloudSpec) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for (layout, _) in spec.layouts {
        for module in LAYOUT_MODULES {
            dirs.push(layout_module_dir(root, spec.cloud, layout, module));
        }
    }
    dirs.extend(shared_modules(root, spec.cloud)?);
    Ok(dirs)
}
