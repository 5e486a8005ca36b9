//! Taking over what Deckhouse's OpenStack Standard layout built: for each of its three modules a
//! state holding Deckhouse's resource addresses and attribute values (test data written from the
//! reference facts) is planned against our layout with the real provider, offline
//! (`-refresh=false`; the data sources read the loopback stand-in of [`crate::openstack_api`]).
//! Nothing may be destroyed or replaced; every Deckhouse address is moved or kept.

use stratus_layouts_check::catalog;
use stratus_layouts_check::takeover::{plan_takeover, PlanSummary};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{fixture, layouts, tofu};
use crate::openstack_api;

/// Plans `module` of the Standard layout against Deckhouse's state; `edit` may change the
/// scratch copy first.
async fn plan(auth_url: &str, module: &str, edit: impl FnOnce(&std::path::Path)) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", "standard", module);
    edit(&dir);
    let data = format!("deckhouse-state/openstack-standard/{module}");
    let mut vars = fixture(&format!("{data}.tfvars.json"));
    vars["providerClusterConfiguration"]["provider"]["authURL"] = auth_url.into();
    let state = fixture(&format!("{data}.tfstate.json"));
    let tofu = tofu();
    tokio::task::spawn_blocking(move || {
        let summary = plan_takeover(&tofu, &dir, &vars, &state);
        drop(ws);
        summary
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{module}: {e}"))
}

fn state_instances(module: &str) -> usize {
    let state = fixture(&format!(
        "deckhouse-state/openstack-standard/{module}.tfstate.json"
    ));
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["instances"].as_array().unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_standard_takes_over_deckhouse_state_without_destroying_anything() {
    let api = openstack_api::start().await;
    // base: keypair, security group and its 4 rules, router interface; master: the etcd volume
    // and its attachment; static node: port, root volume, server, floating IP and association.
    for (module, moves) in [
        ("base-infrastructure", 7),
        ("master-node", 2),
        ("static-node", 5),
    ] {
        let summary = plan(&api.auth_url, module, |_| {}).await;
        let counts = summary.counts();
        eprintln!("{module}: {counts:?}");
        assert!(
            summary.destructive().is_empty(),
            "{module} destroys or replaces:\n{summary}"
        );
        assert_eq!(counts.moves, moves, "{module}:\n{summary}");
        let kept = counts.updates + counts.no_ops;
        assert_eq!(
            kept,
            state_instances(module),
            "{module}: every instance of Deckhouse's state stays:\n{summary}"
        );
    }
    let requests = api.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .all(|r| r.starts_with("GET ") || r.contains("/auth/tokens")),
        "a takeover plan only reads: {requests:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_takeover_without_the_moved_blocks_destroys_the_static_node() {
    let api = openstack_api::start().await;
    let summary = plan(&api.auth_url, "static-node", |dir| {
        std::fs::remove_file(dir.join("moved.tf")).unwrap();
    })
    .await;
    let destroyed: Vec<&str> = summary
        .destructive()
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert!(
        destroyed.contains(&"openstack_compute_instance_v2.node"),
        "{summary}"
    );
}
