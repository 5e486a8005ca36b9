//! Taking over what Deckhouse's OpenStack layouts built: for each layout (Standard, Standard with
//! a bastion, StandardWithNoRouter, Simple, SimpleWithInternalNetwork) and each of its modules a
//! state holding Deckhouse's resource addresses and attribute values (test data written from the
//! reference facts) is planned against our layout with the real provider, offline
//! (`-refresh=false`; the data sources read the loopback stand-in of [`crate::openstack_api`]).
//! Nothing may be destroyed or replaced; every Deckhouse address is moved or kept.

use stratus_layouts_check::catalog;
use stratus_layouts_check::takeover::{plan_takeover, PlanSummary};
use stratus_layouts_check::workspace::Workspace;

use crate::common::{fixture, layouts, tofu};
use crate::openstack_api;

/// One Deckhouse state of a layout module: the layout's directory, the test data's directory
/// under `testdata/deckhouse-state/`, the module, and how many instances must move.
struct Case {
    layout: &'static str,
    data: &'static str,
    module: &'static str,
    moves: usize,
}

/// Plans the case's module against Deckhouse's state; `edit` may change the scratch copy first.
async fn plan(auth_url: &str, case: &Case, edit: impl FnOnce(&std::path::Path)) -> PlanSummary {
    let ws = Workspace::copy(&layouts()).unwrap();
    let dir = catalog::layout_module_dir(&ws.root(), "openstack", case.layout, case.module);
    edit(&dir);
    let data = format!("deckhouse-state/{}/{}", case.data, case.module);
    let mut vars = fixture(&format!("{data}.tfvars.json"));
    vars["providerClusterConfiguration"]["provider"]["authURL"] = auth_url.into();
    let state = fixture(&format!("{data}.tfstate.json"));
    let tofu = tofu();
    let what = format!("{}/{}", case.data, case.module);
    tokio::task::spawn_blocking(move || {
        let summary = plan_takeover(&tofu, &dir, &vars, &state);
        drop(ws);
        summary
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn state_instances(case: &Case) -> usize {
    let state = fixture(&format!(
        "deckhouse-state/{}/{}.tfstate.json",
        case.data, case.module
    ));
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["instances"].as_array().unwrap().len())
        .sum()
}

/// Plans every case: no destroy, no replacement, the expected moves, every instance of
/// Deckhouse's state kept, and only reads sent to the cloud.
async fn takes_over(cases: &[Case]) {
    let api = openstack_api::start().await;
    for case in cases {
        let what = format!("{}/{}", case.data, case.module);
        let summary = plan(&api.auth_url, case, |_| {}).await;
        let counts = summary.counts();
        eprintln!("{what}: {counts:?}");
        assert!(
            summary.destructive().is_empty(),
            "{what} destroys or replaces:\n{summary}"
        );
        assert_eq!(counts.moves, case.moves, "{what}:\n{summary}");
        let kept = counts.updates + counts.no_ops;
        assert_eq!(
            kept,
            state_instances(case),
            "{what}: every instance of Deckhouse's state stays:\n{summary}"
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

const fn case(
    layout: &'static str,
    data: &'static str,
    module: &'static str,
    moves: usize,
) -> Case {
    Case {
        layout,
        data,
        module,
        moves,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_standard_takes_over_deckhouse_state_without_destroying_anything() {
    // base: keypair, security group and its 4 rules, router interface; master: the etcd volume
    // and its attachment; static node: port, root volume, server, floating IP and association.
    // With a bastion: its port, root volume, server and floating IP keep their addresses.
    takes_over(&[
        case("standard", "openstack-standard", "base-infrastructure", 7),
        case("standard", "openstack-standard", "master-node", 2),
        case("standard", "openstack-standard", "static-node", 5),
        case(
            "standard",
            "openstack-standard-bastion",
            "base-infrastructure",
            7,
        ),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_standard_with_no_router_takes_over_deckhouse_state_without_destroying_anything()
{
    // base: keypair, security group and its 4 rules; master: the etcd volume and its
    // attachment (its two ports keep their addresses); static node: two ports, root volume
    // and server.
    let data = "openstack-standard-with-no-router";
    takes_over(&[
        case("standard-with-no-router", data, "base-infrastructure", 6),
        case("standard-with-no-router", data, "master-node", 2),
        case("standard-with-no-router", data, "static-node", 4),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_simple_takes_over_deckhouse_state_without_destroying_anything() {
    // base: the keypair (Deckhouse's Simple has no security group: ours is created); master:
    // the root-level server and root volume, the etcd volume and its attachment; static node:
    // port, root volume and server.
    takes_over(&[
        case("simple", "openstack-simple", "base-infrastructure", 1),
        case("simple", "openstack-simple", "master-node", 4),
        case("simple", "openstack-simple", "static-node", 3),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_simple_with_internal_network_takes_over_deckhouse_state_without_destroying_anything(
) {
    // base: the keypair; master: the etcd volume and its attachment (port, server, server
    // group and floating IP keep their addresses); static node: port, root volume, server,
    // floating IP and association.
    let data = "openstack-simple-with-internal-network";
    takes_over(&[
        case(
            "simple-with-internal-network",
            data,
            "base-infrastructure",
            1,
        ),
        case("simple-with-internal-network", data, "master-node", 2),
        case("simple-with-internal-network", data, "static-node", 5),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openstack_takeover_without_the_moved_blocks_destroys_the_static_node() {
    let api = openstack_api::start().await;
    let standard = case("standard", "openstack-standard", "static-node", 0);
    let summary = plan(&api.auth_url, &standard, |dir| {
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

#[tokio::test(flavor = "multi_thread")]
async fn openstack_simple_takeover_without_the_moved_blocks_destroys_the_master() {
    let api = openstack_api::start().await;
    let simple = case("simple", "openstack-simple", "master-node", 0);
    let summary = plan(&api.auth_url, &simple, |dir| {
        std::fs::remove_file(dir.join("moved.tf")).unwrap();
    })
    .await;
    let destroyed: Vec<&str> = summary
        .destructive()
        .iter()
        .map(|c| c.address.as_str())
        .collect();
    assert!(
        destroyed.contains(&"openstack_compute_instance_v2.master"),
        "{summary}"
    );
}
