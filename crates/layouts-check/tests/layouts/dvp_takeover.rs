//! What stands between Deckhouse's DVP state and a takeover with the stock hashicorp/kubernetes
//! provider, pinned on a Deckhouse-shaped master-node state (test data written from the facts:
//! Deckhouse's addresses, its provider build's own `kubernetes_resource_ready_v1` and
//! `kubernetes_owner_references_v1` beside `kubernetes_manifest` and `kubernetes_secret`, object
//! names derived as Deckhouse derives them).
//!
//! hashicorp/kubernetes 2.38.0 cannot be installed here (the Go module proxy answers 403 for its
//! module), so the state's provider is pointed at the installed OpenStack provider, which, like the
//! stock Kubernetes provider, lacks Deckhouse's own types. What is pinned is tofu's own behaviour:
//! a state holding a type its provider lacks cannot be read, a `removed` block does not help,
//! `tofu state rm` (which needs no schema) does, and what remains are hashicorp/kubernetes's types.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use stratus_layouts_check::takeover::STATE_FILE;
use stratus_layouts_check::tofu::Tofu;

use crate::common::{fixture, squash, tofu};

/// The resource types Deckhouse's own build of the Kubernetes provider adds.
const DECKHOUSE_ONLY_TYPES: [&str; 2] = [
    "kubernetes_resource_ready_v1",
    "kubernetes_owner_references_v1",
];
/// The types of hashicorp/kubernetes 2.38.0 the state also holds.
const STOCK_TYPES: [&str; 2] = ["kubernetes_manifest", "kubernetes_secret"];
/// A provider that is installed offline and, like the stock Kubernetes provider, lacks
/// Deckhouse's own types.
const STAND_IN_PROVIDER: &str =
    "provider[\"registry.opentofu.org/terraform-provider-openstack/openstack\"]";

const MODULE: &str = r#"terraform {
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "1.54.1"
    }
  }
}

provider "openstack" {
  auth_url = "http://127.0.0.1:9/v3"
}
"#;

fn address(resource: &Value, instance: &Value) -> String {
    let mut a = String::new();
    if let Some(m) = resource["module"].as_str() {
        a.push_str(m);
        a.push('.');
    }
    a.push_str(&format!(
        "{}.{}",
        resource["type"].as_str().unwrap(),
        resource["name"].as_str().unwrap()
    ));
    match &instance["index_key"] {
        Value::Number(n) => a.push_str(&format!("[{n}]")),
        Value::String(s) => a.push_str(&format!("[\"{s}\"]")),
        _ => {}
    }
    a
}

/// Every instance address of the state whose type is (or is not) one of Deckhouse's own.
fn addresses(state: &Value, deckhouse_only: bool) -> Vec<String> {
    let mut out = Vec::new();
    for r in state["resources"].as_array().unwrap() {
        let own = DECKHOUSE_ONLY_TYPES.contains(&r["type"].as_str().unwrap());
        if own == deckhouse_only {
            for i in r["instances"].as_array().unwrap() {
                out.push(address(r, i));
            }
        }
    }
    out
}

fn plan(tofu: &Tofu, dir: &Path) -> String {
    let run = tofu
        .run(dir, &["plan", "-refresh=false", "-lock=false", "-no-color"])
        .unwrap();
    assert!(!run.success, "the plan cannot succeed: {}", run.stdout);
    squash(&run.stderr)
}

#[test]
fn dvp_deckhouse_state_needs_its_own_provider_types_removed_with_state_rm_before_a_takeover() {
    let mut state = fixture("deckhouse-state/dvp-standard/master-node.tfstate.json");
    let own = addresses(&state, true);
    assert_eq!(own.len(), 8, "{own:?}");
    for r in state["resources"].as_array_mut().unwrap() {
        r["provider"] = STAND_IN_PROVIDER.into();
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.tf"), MODULE).unwrap();
    std::fs::write(dir.path().join(STATE_FILE), state.to_string()).unwrap();
    let tofu = tofu();
    tofu.run_ok(dir.path(), &["init", "-input=false", "-no-color"])
        .unwrap();

    // The state cannot even be read: tofu needs the schema of every type it holds.
    let unreadable =
        "no schema available for kubernetes_owner_references_v1.root-disk while reading state";
    let error = plan(&tofu, dir.path());
    assert!(error.contains(unreadable), "{error}");

    // Forgetting them with `removed` blocks does not help: the state is read first.
    let removed: String = own
        .iter()
        .map(|a| {
            let resource = a.split('[').next().unwrap();
            format!(
                "removed {{\n  from = {resource}\n  lifecycle {{\n    destroy = false\n  }}\n}}\n"
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    std::fs::write(dir.path().join("removed.tf"), &removed).unwrap();
    let error = plan(&tofu, dir.path());
    assert!(error.contains(unreadable), "{error}");
    std::fs::remove_file(dir.path().join("removed.tf")).unwrap();

    // `tofu state rm` needs no schema: it drops them (readiness checks and ownerReferences
    // patches; no object of the parent cluster goes with them).
    let mut args = vec!["state", "rm", "-lock=false", "-no-color"];
    args.extend(own.iter().map(String::as_str));
    let run = tofu.run_ok(dir.path(), &args).unwrap();
    assert!(
        run.stdout
            .contains("Successfully removed 8 resource instance(s)"),
        "{}",
        run.stdout
    );
    let left: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap())
            .unwrap();
    assert!(addresses(&left, true).is_empty());
    let types: BTreeSet<&str> = left["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, STOCK_TYPES.into_iter().collect(), "{left:#}");
    // What is left is Deckhouse's objects: two disks, the IP address, the Secret and the VM.
    assert_eq!(addresses(&left, false).len(), 5);
    // And the plan no longer stumbles over a missing schema of Deckhouse's types.
    let error = plan(&tofu, dir.path());
    assert!(
        !error.contains("kubernetes_owner_references_v1")
            && !error.contains("kubernetes_resource_ready_v1"),
        "{error}"
    );
}
