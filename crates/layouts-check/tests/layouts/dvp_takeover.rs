//! Taking over clusters Deckhouse's DVP layout built: a state of each layout module holding
//! Deckhouse's addresses (`testdata/deckhouse-state/dvp-standard/*.tfstate.json`, written from the
//! facts: its modules and resource names, its provider build's own `kubernetes_resource_ready_v1`
//! and `kubernetes_owner_references_v1` beside `kubernetes_manifest` and `kubernetes_secret`,
//! object names as Deckhouse derives them) is planned against our layout with the
//! hashicorp/kubernetes stand-in (`crates/testenv/go-kubernetes-schema`; the real provider is not
//! installable here). With Deckhouse's types the state is read, Deckhouse's own resources and its
//! Secret are forgotten (never destroyed) and its objects move to our addresses; with the stock
//! provider's types it cannot be read until they are `tofu state rm`ed. What is left: our object
//! names differ from Deckhouse's, so its node objects are replaced, forced by the name alone.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::Value;
use stratus_layouts_check::catalog;
use stratus_layouts_check::takeover::{plan_module, plan_takeover, PlanSummary, STATE_FILE};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{fixture, kubernetes_tofu, layouts, squash};

/// The resource types Deckhouse's own build of the Kubernetes provider adds.
const DECKHOUSE_ONLY_TYPES: [&str; 2] = [
    "kubernetes_resource_ready_v1",
    "kubernetes_owner_references_v1",
];
/// The node modules of the DVP Standard layout.
const NODES: [&str; 2] = ["master-node", "static-node"];

fn state(module: &str) -> Value {
    fixture(&format!(
        "deckhouse-state/dvp-standard/{module}.tfstate.json"
    ))
}

/// The variables of the cluster the states describe (prefix `c1`, namespace `tenant-a`), with a
/// kubeconfig the provider block can read (nothing is contacted).
fn vars(module: &str) -> Value {
    let mut vars = fixture("deckhouse-state/dvp-standard/takeover.tfvars.json");
    vars["providerClusterConfiguration"]["provider"]["kubeconfigDataBase64"] =
        base64::engine::general_purpose::STANDARD
            .encode("clusters:\n- name: p\n  cluster: {server: https://127.0.0.1:1}\n")
            .into();
    if module == "static-node" {
        vars["nodeGroupName"] = "worker".into();
    }
    vars
}

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

/// Every instance address of the state whose type is one of `types`.
fn addresses(state: &Value, types: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in state["resources"].as_array().unwrap() {
        if types.contains(&r["type"].as_str().unwrap()) {
            for i in r["instances"].as_array().unwrap() {
                out.insert(address(r, i));
            }
        }
    }
    out
}

fn takeover(module: &str) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", module);
    plan_takeover(&kubernetes_tofu(false), &dir, &vars(module), &state(module))
        .unwrap_or_else(|e| panic!("{module}: {e}"))
}

#[test]
fn dvp_takeover_of_deckhouse_base_infrastructure_moves_the_network_policy_in_place() {
    let summary = takeover("base-infrastructure");
    assert!(summary.destructive().is_empty(), "{summary}");
    let policy = summary
        .change("kubernetes_manifest.network_policy[0]")
        .unwrap_or_else(|| panic!("no policy planned:\n{summary}"));
    assert_eq!(
        policy.previous_address.as_deref(),
        Some("kubernetes_manifest.isolated_cluster_prefix_network_policy[\"isolated_cluster_prefix\"]"),
        "{policy}"
    );
    // Same name (isolated-c1), another spec: server-side apply updates it in place.
    assert_eq!(policy.actions, ["update"], "{policy}");
    assert_eq!(policy.after["manifest"]["metadata"]["name"], "isolated-c1");
    let counts = summary.counts();
    assert_eq!((counts.creates, counts.moves), (0, 1), "{summary}");
}

#[test]
fn dvp_stand_in_plans_an_unchanged_manifest_as_no_op_and_a_renamed_one_as_a_replacement() {
    // Deckhouse's policy with our manifest in its state: nothing to do. Renamed: replaced.
    let ours = takeover("base-infrastructure")
        .change("kubernetes_manifest.network_policy[0]")
        .unwrap()
        .after["manifest"]
        .clone();
    for (name, actions) in [
        ("isolated-c1", vec!["no-op"]),
        ("isolated-c0", vec!["create", "delete"]),
    ] {
        let mut state = state("base-infrastructure");
        let attributes = &mut state["resources"][0]["instances"][0]["attributes"];
        attributes["manifest"] = ours.clone();
        attributes["manifest"]["metadata"]["name"] = name.into();
        attributes["object"] = attributes["manifest"].clone();
        attributes["field_manager"] = serde_json::json!([]);
        let ws = Workspace::copy(&layouts()).unwrap();
        let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", "base-infrastructure");
        let summary = plan_takeover(
            &kubernetes_tofu(false),
            &dir,
            &vars("base-infrastructure"),
            &state,
        )
        .unwrap();
        let policy = summary
            .change("kubernetes_manifest.network_policy[0]")
            .unwrap();
        let mut sorted = policy.actions.clone();
        sorted.sort();
        assert_eq!(sorted, actions, "{name}: {policy}");
    }
}

#[test]
fn dvp_takeover_of_deckhouse_nodes_destroys_nothing_forgets_deckhouses_own_and_moves_its_objects() {
    for module in NODES {
        let state = state(module);
        let summary = takeover(module);
        let counts = summary.counts();
        eprintln!("{module}: {counts:?}");
        assert_eq!(counts.deletes, 0, "{module}:\n{summary}");

        // Deckhouse's own resources and its kubernetes_secret leave the state, nothing else does
        // and nothing of them is destroyed.
        let mut forgettable = addresses(&state, &DECKHOUSE_ONLY_TYPES);
        forgettable.extend(addresses(&state, &["kubernetes_secret"]));
        let forgotten: BTreeSet<String> = summary
            .matching(|c| c.is_forget())
            .iter()
            .map(|c| c.address.clone())
            .collect();
        assert_eq!(forgotten, forgettable, "{module}:\n{summary}");

        // Every object of Deckhouse's moves to one of ours.
        let objects = addresses(&state, &["kubernetes_manifest"]);
        let moved: BTreeSet<String> = summary
            .matching(|c| c.is_move())
            .iter()
            .filter_map(|c| c.previous_address.clone())
            .collect();
        assert_eq!(moved, objects, "{module}:\n{summary}");
        assert_eq!(counts.moves, objects.len(), "{module}");

        // What remains (docs/src/layouts.md, point 2): our object names are not Deckhouse's, so
        // each moved object is replaced, forced by its name alone; the Secret (a kubernetes_secret
        // at Deckhouse's) is ours to create.
        for replaced in summary.matching(|c| c.is_replace()) {
            assert!(replaced.is_move(), "{module}: {replaced}");
            assert_eq!(
                replaced.replace_paths,
                [serde_json::json!(["manifest", "metadata", "name"])],
                "{module}: {replaced}"
            );
        }
        assert_eq!(counts.replaces, objects.len(), "{module}:\n{summary}");
        let created: Vec<&str> = summary
            .matching(|c| c.is_create())
            .iter()
            .map(|c| c.address.as_str())
            .collect();
        assert_eq!(
            created,
            ["kubernetes_manifest.cloud_init_secret"],
            "{module}"
        );
    }
}

#[test]
fn dvp_takeover_without_the_takeover_blocks_would_destroy_deckhouses_objects() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", "master-node");
    std::fs::remove_file(dir.join("takeover.tf")).unwrap();
    let summary = plan_takeover(
        &kubernetes_tofu(false),
        &dir,
        &vars("master-node"),
        &state("master-node"),
    )
    .unwrap();
    let destroyed: BTreeSet<&str> = summary
        .matching(|c| c.is_delete())
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert!(
        destroyed.contains("module.master.kubernetes_manifest.vm")
            && destroyed.contains("kubernetes_owner_references_v1.root-disk"),
        "{destroyed:?}"
    );
}

#[test]
fn dvp_stock_provider_cannot_read_deckhouse_state_until_its_own_types_are_removed_with_state_rm() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", "master-node");
    let tofu = kubernetes_tofu(true);
    let state = state("master-node");
    let own = addresses(&state, &DECKHOUSE_ONLY_TYPES);
    assert_eq!(own.len(), 8, "{own:?}");

    // tofu needs the schema of every type the state holds; the shipped `removed` blocks do not
    // help, the state is read first.
    let error = plan_takeover(&tofu, &dir, &vars("master-node"), &state)
        .expect_err("the stock provider cannot read Deckhouse's state")
        .to_string();
    assert!(
        squash(&error).contains("no schema available for")
            && squash(&error).contains("while reading state"),
        "{error}"
    );

    // `tofu state rm` needs no schema: it drops them (readiness checks and ownerReferences
    // patches; no object of the parent cluster goes with them).
    let mut args = vec!["state", "rm", "-lock=false", "-no-color"];
    args.extend(own.iter().map(String::as_str));
    let run = tofu.run_ok(&dir, &args).unwrap();
    assert!(
        run.stdout
            .contains("Successfully removed 8 resource instance(s)"),
        "{}",
        run.stdout
    );
    let left: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(STATE_FILE)).unwrap()).unwrap();
    assert!(addresses(&left, &DECKHOUSE_ONLY_TYPES).is_empty());

    // Then the stock provider plans the takeover like Deckhouse's build: the Secret forgotten,
    // the objects moved, nothing destroyed.
    let summary = plan_module(&tofu, &dir, &vars("master-node")).unwrap();
    assert_eq!(summary.counts().deletes, 0, "{summary}");
    let forgotten: Vec<&str> = summary
        .matching(|c| c.is_forget())
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert_eq!(
        forgotten,
        ["module.master.kubernetes_secret.cloudinit-secret"],
        "{summary}"
    );
    assert_eq!(summary.counts().moves, 4, "{summary}");
}

#[test]
fn dvp_takeover_blocks_leave_a_first_converge_with_the_stock_provider_alone() {
    // The `removed` blocks name types the stock provider lacks: a plan without a state (a new
    // cluster) must not trip over them.
    for module in NODES {
        let ws = Workspace::copy(&layouts()).unwrap();
        let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", module);
        let summary = plan_module(&kubernetes_tofu(true), &dir, &vars(module))
            .unwrap_or_else(|e| panic!("{module}: {e}"));
        let counts = summary.counts();
        assert_eq!(
            (
                counts.deletes,
                counts.replaces,
                counts.forgets,
                counts.moves
            ),
            (0, 0, 0, 0),
            "{module}:\n{summary}"
        );
        assert!(counts.creates >= 4, "{module}:\n{summary}");
    }
}
