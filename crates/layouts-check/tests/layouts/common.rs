//! Shared by the layout tests: the repository, the installed tofu (built once per machine), the
//! fixtures.

use std::path::PathBuf;
use std::sync::OnceLock;

use stratus_layouts_check::catalog;
use stratus_layouts_check::tofu::Tofu;
use stratus_testenv::tools::opentofu::{ensure_opentofu, OpenTofu};

/// `layouts/` of this checkout.
pub fn layouts() -> PathBuf {
    catalog::layouts_root(&catalog::repo_root())
}

/// The repository root.
pub fn repo() -> PathBuf {
    catalog::repo_root()
}

/// The installed OpenTofu (built from its Go module the first time on a machine).
pub fn opentofu() -> &'static OpenTofu {
    static TOFU: OnceLock<OpenTofu> = OnceLock::new();
    TOFU.get_or_init(|| {
        let tofu = ensure_opentofu().expect("installing OpenTofu and its OpenStack provider");
        for (what, took) in &tofu.built {
            eprintln!("built {what} in {} s", took.as_secs());
        }
        tofu
    })
}

/// A runner for the installed tofu with the mirror-only CLI config.
pub fn tofu() -> Tofu {
    let t = opentofu();
    Tofu::new(&t.tofu, &t.cli_config)
}

/// A fixture of `testdata/`, found from the checkout the test runs in (a binary built in another
/// checkout sharing the target directory still reads this one's).
pub fn fixture(name: &str) -> serde_json::Value {
    let path = stratus_layouts_check::catalog::repo_root()
        .join("crates/layouts-check/testdata")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Problems as one line each, for assertion messages.
pub fn lines<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` with every run of whitespace made one space (tofu wraps long diagnostics).
pub fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The hashicorp/aws stand-in (built from `crates/testenv/go-aws-schema` the first time).
pub fn aws_schema() -> &'static stratus_testenv::tools::aws_schema::AwsSchemaProvider {
    static AWS: OnceLock<stratus_testenv::tools::aws_schema::AwsSchemaProvider> = OnceLock::new();
    AWS.get_or_init(|| {
        stratus_testenv::tools::aws_schema::ensure_aws_schema_provider()
            .expect("building the hashicorp/aws stand-in")
    })
}

/// A runner for the installed tofu that installs hashicorp/aws from the stand-in's mirror; the
/// stand-in's aws_availability_zones answers `zones`.
pub fn aws_tofu(zones: &[&str]) -> Tofu {
    let t = opentofu();
    Tofu::new(&t.tofu, &aws_schema().cli_config).with_env("STRATUS_AWS_ZONES", zones.join(","))
}

/// `vars` with the field at `pointer` (a JSON pointer under `providerClusterConfiguration`, such
/// as `/nodeGroups/0/instanceClass/diskType`) set to `value`; an object field is added if missing.
pub fn with_field(
    mut vars: serde_json::Value,
    pointer: &str,
    value: serde_json::Value,
) -> serde_json::Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a JSON pointer");
    let at = vars["providerClusterConfiguration"]
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("the fixture has no {parent}"));
    match at {
        serde_json::Value::Object(fields) => {
            fields.insert(key.to_string(), value);
        }
        serde_json::Value::Array(items) => items[key.parse::<usize>().expect("an index")] = value,
        other => panic!("{parent} is {other}, neither an object nor an array"),
    }
    vars
}

/// Configurations refused by the provider-free module `dir` (a `cluster-config`), one bad field
/// at a time (tofu stops at the first failing validation of a variable): `vars` with each case's
/// field set must fail, the output containing the case's message.
pub fn assert_refused(
    dir: &std::path::Path,
    vars: &serde_json::Value,
    cases: &[(&str, serde_json::Value, &str)],
) {
    let mut wrong = Vec::new();
    for (pointer, value, message) in cases {
        let bad = with_field(vars.clone(), pointer, value.clone());
        match tofu().apply_failure(dir, &bad) {
            Ok(output) if squash(&output).contains(message) => {}
            Ok(output) => wrong.push(format!("{pointer}: no {message:?} in {}", squash(&output))),
            Err(e) => wrong.push(format!("{pointer}: {e}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} refusals wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// The hashicorp/kubernetes stand-in (built from `crates/testenv/go-kubernetes-schema` the first
/// time): hashicorp/kubernetes's types plus the two of Deckhouse's own build.
pub fn kubernetes_schema(
) -> &'static stratus_testenv::tools::kubernetes_schema::KubernetesSchemaProvider {
    use stratus_testenv::tools::kubernetes_schema::{
        ensure_kubernetes_schema_provider, KubernetesSchemaProvider,
    };
    static K8S: OnceLock<KubernetesSchemaProvider> = OnceLock::new();
    K8S.get_or_init(|| {
        ensure_kubernetes_schema_provider().expect("building the hashicorp/kubernetes stand-in")
    })
}

/// A runner for the installed tofu that installs hashicorp/kubernetes from the stand-in's mirror;
/// with `stock` the stand-in lacks Deckhouse's own types, as hashicorp/kubernetes 2.38.0 does. Its
/// `kubernetes_resource` data source contacts no apiserver and finds nothing: the parent namespace
/// of a first converge.
pub fn kubernetes_tofu(stock: bool) -> Tofu {
    kubernetes_tofu_reading_parent(stock).with_env(
        stratus_testenv::tools::kubernetes_schema::NO_PARENT_ENV,
        "1",
    )
}

/// As [`kubernetes_tofu`], its `kubernetes_resource` data source reading the apiserver the
/// provider block names.
pub fn kubernetes_tofu_reading_parent(stock: bool) -> Tofu {
    let t = opentofu();
    let tofu = Tofu::new(&t.tofu, &kubernetes_schema().cli_config);
    if stock {
        tofu.with_env(stratus_testenv::tools::kubernetes_schema::STOCK_ENV, "1")
    } else {
        tofu
    }
}
