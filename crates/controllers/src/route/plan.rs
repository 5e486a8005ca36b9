//! Pure decisions of the route controller: which routes to create, replace and delete in every
//! route table, which nodes then have all their routes, and the `NetworkUnavailable` condition.
//!
//! Ownership: a route is ours when its destination lies inside one of the cluster CIDRs AND it
//! points at a node target or is a blackhole. Any other route (to a gateway, NAT, the local
//! route, or outside the cluster CIDRs) is never touched, even when it collides with a pod CIDR.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};
use stratus_cloud::{Cidr, NextHop, Route, RouteTable, RouteTarget};

/// Node condition type the route controller maintains.
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

/// What the route controller needs to know about one node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeRoutes {
    /// The node's name.
    pub name: String,
    /// Where the node's routes point; `None` while the cloud cannot name it (no provider ID yet).
    pub target: Option<RouteTarget>,
    /// `spec.podCIDRs` (or `spec.podCIDR`), parsed.
    pub pod_cidrs: Vec<Cidr>,
    /// Entries of `spec.podCIDRs` that are not CIDRs.
    pub bad_cidrs: Vec<String>,
}

/// The pod CIDRs of a node: `spec.podCIDRs`, else `spec.podCIDR`; unparseable ones apart.
pub fn pod_cidrs(node: &Node) -> (Vec<Cidr>, Vec<String>) {
    let spec = node.spec.as_ref();
    let texts: Vec<&str> = match spec.and_then(|s| s.pod_cidrs.as_ref()) {
        Some(list) if !list.is_empty() => list.iter().map(String::as_str).collect(),
        _ => spec
            .and_then(|s| s.pod_cidr.as_deref())
            .filter(|c| !c.is_empty())
            .into_iter()
            .collect(),
    };
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for t in texts {
        match Cidr::parse(t) {
            Ok(c) if !good.contains(&c) => good.push(c),
            Ok(_) => {}
            Err(_) => bad.push(t.to_string()),
        }
    }
    (good, bad)
}

/// A hash of everything routes depend on; a node change that leaves it unchanged (a kubelet
/// heartbeat, a label) needs no reconciliation before the next period.
pub fn fingerprint(nodes: &[NodeRoutes]) -> u64 {
    let mut sorted: Vec<&NodeRoutes> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut h = DefaultHasher::new();
    sorted.hash(&mut h);
    h.finish()
}

/// One write to one route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteAction {
    /// The route table.
    pub table: String,
    /// The route's destination.
    pub destination: Cidr,
    /// What to do with it.
    pub kind: ActionKind,
}

/// What a [`RouteAction`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionKind {
    /// Add a route to the target.
    Create(RouteTarget),
    /// The route exists but is a blackhole or points at another target.
    Replace(RouteTarget),
    /// The route is ours and no node claims its destination any more.
    Delete,
}

impl RouteAction {
    /// The target this action points a route at, if any.
    pub fn target(&self) -> Option<&RouteTarget> {
        match &self.kind {
            ActionKind::Create(t) | ActionKind::Replace(t) => Some(t),
            ActionKind::Delete => None,
        }
    }
}

/// Where one node stands after the plan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeOutcome {
    /// The node can have all its routes: it has pod CIDRs and a target, and nothing blocks them.
    pub routable: bool,
    /// Indexes into [`RoutePlan::actions`] that must all succeed for the node to be routed.
    pub actions: Vec<usize>,
}

/// Everything one reconciliation does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoutePlan {
    /// The route writes, in order.
    pub actions: Vec<RouteAction>,
    /// Per node name.
    pub nodes: BTreeMap<String, NodeOutcome>,
    /// Things an operator should fix (foreign routes in the way, CIDRs outside the cluster…).
    pub problems: Vec<Problem>,
}

/// A reason some route cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The node.
    pub node: String,
    /// What is wrong, for the log.
    pub message: String,
}

/// Whether the controller owns `route`.
pub fn is_owned(route: &Route, cluster_cidrs: &[Cidr]) -> bool {
    matches!(route.next_hop, NextHop::Target(_) | NextHop::Blackhole)
        && cluster_cidrs.iter().any(|c| c.contains(&route.destination))
}

/// Plans the writes that bring every table to one route per pod CIDR, pointing at its node.
///
/// A destination claimed by a node whose target is unknown keeps its route as it is. When two
/// nodes claim the same CIDR, the first by name gets it and the other is reported.
pub fn plan_routes(
    nodes: &[NodeRoutes],
    tables: &[RouteTable],
    cluster_cidrs: &[Cidr],
) -> RoutePlan {
    let mut plan = RoutePlan::default();
    let mut sorted: Vec<&NodeRoutes> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut claimed: BTreeMap<Cidr, &str> = BTreeMap::new();
    for node in &sorted {
        let mut outcome = NodeOutcome {
            routable: !node.pod_cidrs.is_empty() && node.target.is_some(),
            actions: Vec::new(),
        };
        let mut problem = |message: String| {
            plan.problems.push(Problem {
                node: node.name.clone(),
                message,
            })
        };
        for bad in &node.bad_cidrs {
            outcome.routable = false;
            problem(format!("pod CIDR {bad:?} is not a CIDR"));
        }
        for cidr in &node.pod_cidrs {
            if !cluster_cidrs.iter().any(|c| c.contains(cidr)) {
                outcome.routable = false;
                problem(format!(
                    "pod CIDR {cidr} is outside the cluster CIDRs ({}); no route is made for it",
                    list(cluster_cidrs)
                ));
                continue;
            }
            if let Some(owner) = claimed.get(cidr) {
                outcome.routable = false;
                problem(format!(
                    "pod CIDR {cidr} is also the pod CIDR of node {owner}"
                ));
                continue;
            }
            claimed.insert(*cidr, &node.name);
            let Some(target) = &node.target else { continue };
            for table in tables {
                let existing = table.routes.iter().find(|r| r.destination == *cidr);
                let kind = match existing {
                    None => ActionKind::Create(target.clone()),
                    Some(r) if !is_owned(r, cluster_cidrs) => {
                        outcome.routable = false;
                        problem(format!(
                            "route table {} already routes {cidr} to {}, which is not ours to change",
                            table.id,
                            describe(&r.next_hop)
                        ));
                        continue;
                    }
                    Some(Route {
                        next_hop: NextHop::Target(t),
                        ..
                    }) if t == target => continue,
                    Some(_) => ActionKind::Replace(target.clone()),
                };
                outcome.actions.push(plan.actions.len());
                plan.actions.push(RouteAction {
                    table: table.id.clone(),
                    destination: *cidr,
                    kind,
                });
            }
        }
        plan.nodes.insert(node.name.clone(), outcome);
    }
    for table in tables {
        for route in &table.routes {
            if is_owned(route, cluster_cidrs) && !claimed.contains_key(&route.destination) {
                plan.actions.push(RouteAction {
                    table: table.id.clone(),
                    destination: route.destination,
                    kind: ActionKind::Delete,
                });
            }
        }
    }
    plan
}

/// The distinct targets the plan points routes at (each prepared once, before the writes).
pub fn targets_to_prepare(actions: &[RouteAction]) -> BTreeSet<RouteTarget> {
    actions
        .iter()
        .filter_map(RouteAction::target)
        .cloned()
        .collect()
}

/// Whether a node has all its routes, given which actions failed.
pub fn is_routed(outcome: Option<&NodeOutcome>, failed: &[bool]) -> bool {
    outcome.is_some_and(|o| o.routable && o.actions.iter().all(|&i| !failed[i]))
}

fn describe(hop: &NextHop) -> String {
    match hop {
        NextHop::Target(t) => t.0.clone(),
        NextHop::Blackhole => "a blackhole".to_string(),
        NextHop::Other(s) => s.clone(),
    }
}

fn list(cidrs: &[Cidr]) -> String {
    cidrs
        .iter()
        .map(Cidr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The node's `NetworkUnavailable` condition status (`True`, `False`, `Unknown`), if set.
pub fn network_unavailable(node: &Node) -> Option<&str> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE))
        .map(|c| c.status.as_str())
}

/// The `nodes/status` strategic-merge patch setting `NetworkUnavailable`, or `None` when the
/// condition already says so. As upstream: `False`/`RouteCreated` once every route exists,
/// `True`/`NoRouteCreated` otherwise; a condition with the right status is left alone whatever
/// its reason (a CNI may own it).
pub fn condition_patch(node: &Node, routed: bool, now: Time) -> Option<Value> {
    let wanted = if routed { "False" } else { "True" };
    if network_unavailable(node) == Some(wanted) {
        return None;
    }
    let (reason, message) = if routed {
        ("RouteCreated", "RouteController created a route")
    } else {
        ("NoRouteCreated", "RouteController failed to create a route")
    };
    let condition = NodeCondition {
        type_: NETWORK_UNAVAILABLE.to_string(),
        status: wanted.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now.clone()),
        last_heartbeat_time: Some(now),
    };
    Some(json!({ "status": { "conditions": [condition] } }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    fn t(s: &str) -> RouteTarget {
        RouteTarget(s.to_string())
    }

    fn node(name: &str, target: Option<&str>, cidrs: &[&str]) -> NodeRoutes {
        NodeRoutes {
            name: name.to_string(),
            target: target.map(t),
            pod_cidrs: cidrs.iter().map(|s| c(s)).collect(),
            bad_cidrs: vec![],
        }
    }

    fn route(dest: &str, hop: NextHop) -> Route {
        Route {
            destination: c(dest),
            next_hop: hop,
        }
    }

    fn to(s: &str) -> NextHop {
        NextHop::Target(t(s))
    }

    fn table(id: &str, routes: Vec<Route>) -> RouteTable {
        RouteTable {
            id: id.to_string(),
            routes,
        }
    }

    fn cluster() -> Vec<Cidr> {
        vec![c("10.244.0.0/16"), c("fd00:10:244::/56")]
    }

    fn kinds(plan: &RoutePlan) -> Vec<(String, String, ActionKind)> {
        plan.actions
            .iter()
            .map(|a| (a.table.clone(), a.destination.to_string(), a.kind.clone()))
            .collect()
    }

    #[test]
    fn creates_every_pod_cidr_in_every_table() {
        let nodes = [node(
            "n1",
            Some("i-1"),
            &["10.244.1.0/24", "fd00:10:244:1::/64"],
        )];
        let tables = [table("rtb-a", vec![]), table("rtb-b", vec![])];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert_eq!(
            kinds(&plan),
            vec![
                (
                    "rtb-a".into(),
                    "10.244.1.0/24".into(),
                    ActionKind::Create(t("i-1"))
                ),
                (
                    "rtb-b".into(),
                    "10.244.1.0/24".into(),
                    ActionKind::Create(t("i-1"))
                ),
                (
                    "rtb-a".into(),
                    "fd00:10:244:1::/64".into(),
                    ActionKind::Create(t("i-1"))
                ),
                (
                    "rtb-b".into(),
                    "fd00:10:244:1::/64".into(),
                    ActionKind::Create(t("i-1"))
                ),
            ]
        );
        let outcome = &plan.nodes["n1"];
        assert!(outcome.routable);
        assert_eq!(outcome.actions, vec![0, 1, 2, 3]);
        assert!(plan.problems.is_empty());
        assert_eq!(targets_to_prepare(&plan.actions).len(), 1);
        assert!(is_routed(Some(outcome), &[false; 4]));
        assert!(!is_routed(Some(outcome), &[false, false, true, false]));
        assert!(!is_routed(None, &[]));
    }

    #[test]
    fn steady_state_plans_nothing() {
        let nodes = [node("n1", Some("i-1"), &["10.244.1.0/24"])];
        let tables = [
            table(
                "rtb-a",
                vec![
                    route("10.0.0.0/16", NextHop::Other("local".into())),
                    route("10.244.1.0/24", to("i-1")),
                ],
            ),
            table("rtb-b", vec![route("10.244.1.0/24", to("i-1"))]),
        ];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert!(plan.actions.is_empty(), "{plan:?}");
        assert!(is_routed(plan.nodes.get("n1"), &[]));
    }

    #[test]
    fn replaces_blackholes_and_routes_to_other_instances_per_table() {
        let nodes = [node("n1", Some("i-new"), &["10.244.1.0/24"])];
        let tables = [
            table("rtb-a", vec![route("10.244.1.0/24", NextHop::Blackhole)]),
            table("rtb-b", vec![route("10.244.1.0/24", to("i-old"))]),
            table("rtb-c", vec![route("10.244.1.0/24", to("i-new"))]),
        ];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert_eq!(
            kinds(&plan),
            vec![
                (
                    "rtb-a".into(),
                    "10.244.1.0/24".into(),
                    ActionKind::Replace(t("i-new"))
                ),
                (
                    "rtb-b".into(),
                    "10.244.1.0/24".into(),
                    ActionKind::Replace(t("i-new"))
                ),
            ]
        );
    }

    #[test]
    fn deletes_only_owned_unclaimed_routes() {
        let nodes = [node("n1", Some("i-1"), &["10.244.1.0/24"])];
        let tables = [table(
            "rtb-a",
            vec![
                route("10.244.1.0/24", to("i-1")),
                // A node that is gone, and a blackhole: ours, deleted.
                route("10.244.2.0/24", to("i-2")),
                route("fd00:10:244:9::/64", NextHop::Blackhole),
                // Inside the cluster CIDR but to a gateway: never ours.
                route("10.244.200.0/24", NextHop::Other("igw-1".into())),
                // Outside the cluster CIDR: never ours, whatever the target.
                route("10.99.0.0/24", to("i-9")),
                route("0.0.0.0/0", NextHop::Other("igw-1".into())),
                route("192.168.0.0/24", NextHop::Blackhole),
            ],
        )];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert_eq!(
            kinds(&plan),
            vec![
                ("rtb-a".into(), "10.244.2.0/24".into(), ActionKind::Delete),
                (
                    "rtb-a".into(),
                    "fd00:10:244:9::/64".into(),
                    ActionKind::Delete
                ),
            ]
        );
    }

    #[test]
    fn foreign_route_on_a_pod_cidr_is_reported_not_changed() {
        let nodes = [node("n1", Some("i-1"), &["10.244.1.0/24"])];
        let tables = [
            table(
                "rtb-a",
                vec![route("10.244.1.0/24", NextHop::Other("nat-1".into()))],
            ),
            table("rtb-b", vec![]),
        ];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert_eq!(
            kinds(&plan),
            vec![(
                "rtb-b".into(),
                "10.244.1.0/24".into(),
                ActionKind::Create(t("i-1"))
            )]
        );
        assert!(!plan.nodes["n1"].routable);
        assert!(plan.problems[0].message.contains("nat-1"), "{plan:?}");
    }

    #[test]
    fn unknown_target_keeps_the_existing_route() {
        let nodes = [node("n1", None, &["10.244.1.0/24"])];
        let tables = [table("rtb-a", vec![route("10.244.1.0/24", to("i-1"))])];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert!(plan.actions.is_empty());
        assert!(!plan.nodes["n1"].routable);
    }

    #[test]
    fn node_without_cidrs_is_not_routable_and_costs_nothing() {
        let nodes = [node("n1", Some("i-1"), &[])];
        let plan = plan_routes(&nodes, &[table("rtb-a", vec![])], &cluster());
        assert!(plan.actions.is_empty());
        assert!(!is_routed(plan.nodes.get("n1"), &[]));
        assert!(plan.problems.is_empty());
    }

    #[test]
    fn cidr_outside_the_cluster_and_bad_cidrs_are_reported() {
        let mut n = node("n1", Some("i-1"), &["10.99.1.0/24", "10.244.1.0/24"]);
        n.bad_cidrs.push("nonsense".into());
        let plan = plan_routes(&[n], &[table("rtb-a", vec![])], &cluster());
        assert_eq!(
            kinds(&plan),
            vec![(
                "rtb-a".into(),
                "10.244.1.0/24".into(),
                ActionKind::Create(t("i-1"))
            )]
        );
        assert!(!plan.nodes["n1"].routable);
        assert_eq!(plan.problems.len(), 2, "{plan:?}");
    }

    #[test]
    fn a_cidr_claimed_twice_goes_to_the_first_node_by_name() {
        let nodes = [
            node("n2", Some("i-2"), &["10.244.1.0/24"]),
            node("n1", Some("i-1"), &["10.244.1.0/24"]),
        ];
        let tables = [table("rtb-a", vec![route("10.244.1.0/24", to("i-2"))])];
        let plan = plan_routes(&nodes, &tables, &cluster());
        assert_eq!(
            kinds(&plan),
            vec![(
                "rtb-a".into(),
                "10.244.1.0/24".into(),
                ActionKind::Replace(t("i-1"))
            )]
        );
        assert!(plan.nodes["n1"].routable);
        assert!(!plan.nodes["n2"].routable);
        assert!(plan.problems[0].message.contains("n1"));
    }

    #[test]
    fn fingerprint_ignores_order_and_sees_relevant_changes() {
        let a = node("a", Some("i-1"), &["10.244.1.0/24"]);
        let b = node("b", Some("i-2"), &["10.244.2.0/24"]);
        assert_eq!(
            fingerprint(&[a.clone(), b.clone()]),
            fingerprint(&[b.clone(), a.clone()])
        );
        let mut b2 = b.clone();
        b2.target = Some(t("i-3"));
        assert_ne!(fingerprint(&[a.clone(), b]), fingerprint(&[a.clone(), b2]));
        assert_ne!(fingerprint(std::slice::from_ref(&a)), fingerprint(&[]));
    }

    fn k8s_node(pod_cidr: Option<&str>, pod_cidrs: &[&str], condition: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n".into());
        n.spec = Some(NodeSpec {
            pod_cidr: pod_cidr.map(str::to_string),
            pod_cidrs: (!pod_cidrs.is_empty())
                .then(|| pod_cidrs.iter().map(|s| s.to_string()).collect()),
            ..NodeSpec::default()
        });
        n.status = Some(NodeStatus {
            conditions: condition.map(|s| {
                vec![NodeCondition {
                    type_: NETWORK_UNAVAILABLE.into(),
                    status: s.into(),
                    ..NodeCondition::default()
                }]
            }),
            ..NodeStatus::default()
        });
        n
    }

    #[test]
    fn reads_pod_cidrs() {
        let (good, bad) = pod_cidrs(&k8s_node(
            Some("10.244.1.0/24"),
            &["10.244.1.0/24", "fd00:10:244:1::/64", "x", "10.244.1.0/24"],
            None,
        ));
        assert_eq!(good, vec![c("10.244.1.0/24"), c("fd00:10:244:1::/64")]);
        assert_eq!(bad, vec!["x".to_string()]);
        let (good, _) = pod_cidrs(&k8s_node(Some("10.244.2.0/24"), &[], None));
        assert_eq!(good, vec![c("10.244.2.0/24")]);
        let (good, bad) = pod_cidrs(&k8s_node(Some(""), &[], None));
        assert!(good.is_empty() && bad.is_empty());
    }

    #[test]
    fn condition_is_written_only_when_it_changes() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let unset = k8s_node(None, &[], None);
        let patch = condition_patch(&unset, true, now.clone()).unwrap();
        let cond = &patch["status"]["conditions"][0];
        assert_eq!(cond["type"], "NetworkUnavailable");
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "RouteCreated");
        assert_eq!(cond["message"], "RouteController created a route");
        assert!(cond["lastTransitionTime"].is_string());
        let no = condition_patch(&unset, false, now.clone()).unwrap();
        assert_eq!(no["status"]["conditions"][0]["status"], "True");
        assert_eq!(no["status"]["conditions"][0]["reason"], "NoRouteCreated");
        assert_eq!(
            condition_patch(&k8s_node(None, &[], Some("False")), true, now.clone()),
            None
        );
        assert_eq!(
            condition_patch(&k8s_node(None, &[], Some("True")), false, now.clone()),
            None
        );
        assert!(condition_patch(&k8s_node(None, &[], Some("True")), true, now.clone()).is_some());
        assert!(condition_patch(&k8s_node(None, &[], Some("Unknown")), true, now).is_some());
    }
}
