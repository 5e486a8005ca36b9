//! Taking over clusters Deckhouse's DVP layout built: a state of each layout module holding
//! Deckhouse's addresses (`testdata/deckhouse-state/dvp-standard/*.tfstate.json`, written from the
//! facts: its modules and resource names, its provider build's own `kubernetes_resource_ready_v1`
//! and `kubernetes_owner_references_v1` beside `kubernetes_manifest` and `kubernetes_secret`,
//! object names as Deckhouse derives them, checked here by a derivation of our own) is planned
//! against our layout with the hashicorp/kubernetes stand-in (`crates/testenv/go-kubernetes-schema`;
//! the real provider is not installable here). The VM's name hashes the address the parent
//! cluster allocated to its VirtualMachineIPAddress: the layout reads it back with the
//! `kubernetes_resource` data source, which the stand-in answers from a real kube-apiserver
//! serving the virtualization CRDs, holding the node's VirtualMachineIPAddress. With Deckhouse's
//! types the state is read, Deckhouse's own resources are forgotten (never destroyed), its objects
//! and its Secret move to our addresses under the same names and are updated in place, the VM's
//! spec unchanged; with the stock provider's types it cannot be read until they are `tofu state
//! rm`ed.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use base64::Engine as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{json, Value};
use stratus_layouts_check::catalog;
use stratus_layouts_check::takeover::{plan_module, plan_takeover, PlanSummary, STATE_FILE};
use stratus_layouts_check::workspace::Workspace;
use stratus_testenv::tools::virtualization_crds::{
    ensure_virtualization_crds, install_virtualization_crds,
};
use stratus_testenv::{Identity, KubeCluster};

use crate::common::{fixture, kubernetes_tofu, kubernetes_tofu_reading_parent, layouts, squash};

/// The resource types Deckhouse's own build of the Kubernetes provider adds.
const DECKHOUSE_ONLY_TYPES: [&str; 2] = [
    "kubernetes_resource_ready_v1",
    "kubernetes_owner_references_v1",
];
/// The node modules of the DVP Standard layout.
pub(crate) const NODES: [&str; 2] = ["master-node", "static-node"];

pub(crate) fn state(module: &str) -> Value {
    fixture(&format!(
        "deckhouse-state/dvp-standard/{module}.tfstate.json"
    ))
}

/// The variables of the cluster the states describe (prefix `c1`, namespace `tenant-a`), with a
/// kubeconfig the provider block can read (nothing is contacted).
pub(crate) fn vars(module: &str) -> Value {
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

/// The states' namespace in the parent cluster.
const NAMESPACE: &str = "tenant-a";
/// The address the parent allocated to each node's VirtualMachineIPAddress (Deckhouse hashed it
/// into the VM's name): layout module, VirtualMachineIPAddress, address.
pub(crate) const ALLOCATED: [(&str, &str, &str); 2] = [
    ("master-node", "c1-master-0-auto", "10.66.10.5"),
    ("static-node", "c1-worker-0-auto", "10.66.10.6"),
];

/// The attributes of the state's instance at `address`.
pub(crate) fn instance<'a>(state: &'a Value, address: &str) -> &'a Value {
    for r in state["resources"].as_array().unwrap() {
        for i in r["instances"].as_array().unwrap() {
            if self::address(r, i) == address {
                return &i["attributes"];
            }
        }
    }
    panic!("the state holds no {address}")
}

/// The parent cluster: a real kube-apiserver serving the virtualization CRDs, the states'
/// namespace holding each node's VirtualMachineIPAddress bound to its address.
struct Parent {
    _cluster: KubeCluster,
    client: kube::Client,
    kubeconfig: Vec<u8>,
}

impl Parent {
    async fn start() -> Result<Parent> {
        let crds = tokio::task::spawn_blocking(ensure_virtualization_crds).await??;
        let cluster = KubeCluster::start().await?;
        let client = cluster.kube_client(Identity::Admin).await?;
        install_virtualization_crds(&client, &crds).await?;
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
            )
            .await?;
        let kubeconfig = std::fs::read(cluster.kubeconfig(Identity::Admin))?;
        let parent = Parent {
            _cluster: cluster,
            client,
            kubeconfig,
        };
        for (_, name, address) in ALLOCATED {
            parent.bind(name, address).await?;
        }
        Ok(parent)
    }

    /// Creates or updates the VirtualMachineIPAddress `name`, bound to `address` as the platform
    /// leaves it (this CRD has no status subresource: the status is written with the object).
    async fn bind(&self, name: &str, address: &str) -> Result<()> {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "virtualization.deckhouse.io/v1alpha2",
            "kind": "VirtualMachineIPAddress",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": "Auto", "staticIP": ""},
            "status": {"phase": "Bound", "address": address},
        }))?;
        self.ip_addresses()
            .patch(
                name,
                &PatchParams::apply("stratus-layouts-check").force(),
                &Patch::Apply(&object),
            )
            .await
            .with_context(|| format!("binding {name} to {address}"))?;
        Ok(())
    }

    /// Deletes the VirtualMachineIPAddress `name`.
    async fn unbind(&self, name: &str) -> Result<()> {
        self.ip_addresses()
            .delete(name, &Default::default())
            .await
            .with_context(|| format!("deleting {name}"))?;
        Ok(())
    }

    fn ip_addresses(&self) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(
            "virtualization.deckhouse.io",
            "v1alpha2",
            "VirtualMachineIPAddress",
        );
        let resource = ApiResource::from_gvk_with_plural(&gvk, "virtualmachineipaddresses");
        Api::namespaced_with(self.client.clone(), NAMESPACE, &resource)
    }

    /// The takeover variables of `module`, the kubeconfig reaching this parent.
    fn vars(&self, module: &str) -> Value {
        let mut vars = vars(module);
        vars["providerClusterConfiguration"]["provider"]["kubeconfigDataBase64"] =
            base64::engine::general_purpose::STANDARD
                .encode(&self.kubeconfig)
                .into();
        vars
    }
}

/// Plans `module` against `state` with the stand-in reading the parent `vars` reach.
async fn plan_reading_parent(module: &str, vars: Value, state: Value) -> Result<PlanSummary> {
    let module = module.to_string();
    tokio::task::spawn_blocking(move || {
        let ws = Workspace::copy(&layouts())?;
        let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", &module);
        plan_takeover(&kubernetes_tofu_reading_parent(false), &dir, &vars, &state)
            .with_context(|| format!("planning {module}"))
    })
    .await?
}

/// The paths (dotted) at which `a` and `b` differ; lists compare whole, an empty map equals none
/// (as the providers' map attributes do).
fn differences(a: &Value, b: &Value, at: &str, out: &mut BTreeSet<String>) {
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(|m| m.is_empty());
    match (a, b) {
        _ if empty(a) && empty(b) => {}
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                differences(
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    &path,
                    out,
                );
            }
        }
        _ if a != b => {
            out.insert(at.to_string());
        }
        _ => {}
    }
}

/// What the plan changes in each object it moved: the differing paths of its manifest (of its
/// metadata for the Secret), by our address.
fn updated_paths(
    state: &Value,
    summary: &PlanSummary,
) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let mut out = std::collections::BTreeMap::new();
    for change in summary.matching(|c| c.is_move()) {
        let before = instance(state, change.previous_address.as_deref().unwrap());
        let mut paths = BTreeSet::new();
        if change.address.starts_with("kubernetes_secret.") {
            differences(
                &before["metadata"][0],
                &change.after["metadata"][0],
                "metadata",
                &mut paths,
            );
            // What the API server fills in, which the plan leaves unknown.
            paths.retain(|p| {
                ![
                    "metadata.generation",
                    "metadata.resource_version",
                    "metadata.uid",
                    "metadata.generate_name",
                ]
                .contains(&p.as_str())
            });
            differences(&before["data"], &change.after["data"], "data", &mut paths);
        } else {
            differences(
                &before["manifest"],
                &change.after["manifest"],
                "",
                &mut paths,
            );
        }
        out.insert(change.address.clone(), paths);
    }
    out
}

#[tokio::test]
async fn dvp_takeover_of_deckhouse_nodes_replaces_nothing_and_keeps_each_vm_spec() -> Result<()> {
    let parent = Parent::start().await?;
    for module in NODES {
        let state = state(module);
        let summary = plan_reading_parent(module, parent.vars(module), state.clone()).await?;
        let counts = summary.counts();
        eprintln!("{module}: {counts:?}\n{summary}");
        assert!(summary.destructive().is_empty(), "{module}:\n{summary}");
        assert_eq!(
            (counts.deletes, counts.replaces, counts.creates),
            (0, 0, 0),
            "{module}:\n{summary}"
        );

        // Deckhouse's own resources leave the state, nothing of them destroyed.
        let forgotten: BTreeSet<String> = summary
            .matching(|c| c.is_forget())
            .iter()
            .map(|c| c.address.clone())
            .collect();
        assert_eq!(
            forgotten,
            addresses(&state, &DECKHOUSE_ONLY_TYPES),
            "{module}:\n{summary}"
        );

        // Every object of Deckhouse's, the Secret too, moves to one of ours under its name.
        let objects = addresses(&state, &["kubernetes_manifest", "kubernetes_secret"]);
        let moved: BTreeSet<String> = summary
            .matching(|c| c.is_move())
            .iter()
            .filter_map(|c| c.previous_address.clone())
            .collect();
        assert_eq!(moved, objects, "{module}:\n{summary}");

        // What updates in place: labels (ours add the node group, the VM's the cluster's extra
        // ones), Deckhouse's annotations kept; the VM's spec is Deckhouse's to the field.
        let updated = updated_paths(&state, &summary);
        eprintln!("{module}: {updated:#?}");
        // Disks and IP address gain our node-group label; the VM's manifest is Deckhouse's
        // (an update, if any, is of the provider's `wait` and `timeouts`, not of the object); the
        // Secret gains our labels (Deckhouse's has none).
        let labels: BTreeSet<String> =
            ["metadata.labels.dvp.deckhouse.io/node-group".to_string()].into();
        let secret_labels: BTreeSet<String> = [
            "deckhouse.io/managed-by",
            "dvp.deckhouse.io/cluster-uuid",
            "dvp.deckhouse.io/hostname",
            "dvp.deckhouse.io/node-group",
        ]
        .iter()
        .map(|l| format!("metadata.labels.{l}"))
        .collect();
        for (address, paths) in &updated {
            let expected = match address.as_str() {
                "kubernetes_manifest.virtual_machine" => BTreeSet::new(),
                "kubernetes_secret.cloud_init" => secret_labels.clone(),
                _ => labels.clone(),
            };
            assert_eq!(paths, &expected, "{module}: {address}");
        }
        let vm = summary
            .change("kubernetes_manifest.virtual_machine")
            .unwrap();
        let owner_address = vm.previous_address.clone().unwrap();
        let vm_state = instance(&state, &owner_address);
        // Of the VM's other attributes only the provider's own settings (how long and for what
        // to wait) change; they send nothing to the parent.
        let settings: Vec<&str> = [
            "wait",
            "timeouts",
            "field_manager",
            "computed_fields",
            "wait_for",
        ]
        .into_iter()
        .filter(|a| {
            let mut d = BTreeSet::new();
            differences(&vm_state[*a], &vm.after[*a], a, &mut d);
            !d.is_empty()
        })
        .collect();
        assert!(
            settings.iter().all(|a| ["wait", "timeouts"].contains(a)),
            "{module}: the VM's {settings:?} change"
        );
        let vm_after = &summary
            .change("kubernetes_manifest.virtual_machine")
            .unwrap()
            .after["manifest"];
        let owner = if module == "master-node" {
            "master"
        } else {
            "static-node"
        };
        let vm_before =
            &instance(&state, &format!("module.{owner}.kubernetes_manifest.vm"))["manifest"];
        assert_eq!(vm_after["spec"], vm_before["spec"], "{module}");
        assert_eq!(
            vm_after["metadata"]["annotations"], vm_before["metadata"]["annotations"],
            "{module}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn dvp_takeover_replaces_the_vm_when_a_hash_input_differs() -> Result<()> {
    // The check above can fail: what Deckhouse hashed into the VM's name differs (the parent
    // allocated another address; the class asks for more cores), so the name does and the VM and
    // its Secret are replaced; the disks and the IP address are not. The address is the
    // parent's answer: without its VirtualMachineIPAddress a node's VM name is not known.
    let parent = Parent::start().await?;
    let mut more_cores = parent.vars("master-node");
    more_cores["providerClusterConfiguration"]["masterNodeGroup"]["instanceClass"]
        ["virtualMachine"]["cpu"]["cores"] = 6.into();
    let before = plan_reading_parent("master-node", more_cores, state("master-node")).await?;
    parent.bind("c1-master-0-auto", "10.66.10.99").await?;
    let other_address = plan_reading_parent(
        "master-node",
        parent.vars("master-node"),
        state("master-node"),
    )
    .await?;
    for (why, summary) in [("cores", before), ("address", other_address)] {
        let replaced: BTreeSet<&str> = summary
            .matching(|c| c.is_replace())
            .iter()
            .map(|c| c.address.as_str())
            .collect();
        assert_eq!(
            replaced,
            BTreeSet::from([
                "kubernetes_manifest.virtual_machine",
                "kubernetes_secret.cloud_init"
            ]),
            "{why}:\n{summary}"
        );
        let vm = summary
            .change("kubernetes_manifest.virtual_machine")
            .unwrap();
        assert_eq!(
            vm.replace_paths,
            [json!(["manifest", "metadata", "name"])],
            "{why}: {vm}"
        );
    }

    // A new node: the apiserver answers 404 for its VirtualMachineIPAddress, the data source
    // reads nothing and the VM's name waits for the address allocated at apply.
    parent.unbind("c1-worker-0-auto").await?;
    let vars = parent.vars("static-node");
    let summary = tokio::task::spawn_blocking(move || {
        let ws = Workspace::copy(&layouts())?;
        let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", "static-node");
        plan_module(&kubernetes_tofu_reading_parent(false), &dir, &vars).context("first plan")
    })
    .await??;
    let counts = summary.counts();
    assert_eq!((counts.creates, counts.deletes), (4, 0), "{summary}");
    assert_vm_name_unknown(&summary, "static-node");
    Ok(())
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

#[tokio::test]
async fn dvp_stock_provider_cannot_read_deckhouse_state_until_its_own_types_are_removed_with_state_rm(
) -> Result<()> {
    let parent = Parent::start().await?;
    let vars = parent.vars("master-node");
    tokio::task::spawn_blocking(move || {
        let ws = Workspace::copy(&layouts()).unwrap();
        let dir = catalog::layout_module_dir(&ws.root(), "dvp", "standard", "master-node");
        let tofu = kubernetes_tofu_reading_parent(true);
        let state = state("master-node");
        let own = addresses(&state, &DECKHOUSE_ONLY_TYPES);
        assert_eq!(own.len(), 8, "{own:?}");

        // tofu needs the schema of every type the state holds; the shipped `removed` blocks do
        // not help, the state is read first.
        let error = plan_takeover(&tofu, &dir, &vars, &state)
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

        // Then the stock provider plans the takeover like Deckhouse's build: every object,
        // the Secret too, moved, nothing forgotten, destroyed or replaced.
        let summary = plan_module(&tofu, &dir, &vars).unwrap();
        let counts = summary.counts();
        assert_eq!(
            (
                counts.deletes,
                counts.replaces,
                counts.forgets,
                counts.moves
            ),
            (0, 0, 0, 5),
            "{summary}"
        );
    })
    .await?;
    Ok(())
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
        // The parent holds no address yet (Auto): the VM's name waits for the one allocated to
        // the VirtualMachineIPAddress the apply creates.
        assert_vm_name_unknown(&summary, module);
    }
}

/// The plan leaves the VM's name unknown: it waits for the address the parent allocates.
fn assert_vm_name_unknown(summary: &PlanSummary, module: &str) {
    let vm = summary
        .change("kubernetes_manifest.virtual_machine")
        .unwrap();
    assert!(
        vm.after["manifest"]["metadata"].get("name").is_none(),
        "{module}: {}",
        vm.after["manifest"]["metadata"]
    );
}
