//! The Routes capability: cloud routes that send each node's pod CIDRs to the node's machine.
//!
//! A cloud may keep the cluster's routes in several route tables (AWS: every table tagged for
//! the cluster; a cloud with a single router has one). Every table must hold every route, so
//! the generic route controller reads all tables at once and changes them one route at a time;
//! the provider only lists, writes and names targets. Which routes the controller owns is decided
//! by the controller (inside the cluster CIDR, to a node target or a blackhole), never by the
//! provider.

use async_trait::async_trait;

use crate::{Cidr, CloudError, NodeInfo};

/// The cloud's name for a node as the next hop of its pod routes (AWS: the EC2 instance ID).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteTarget(pub String);

impl std::fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an existing route sends its traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHop {
    /// A machine that can be a node (AWS: an instance).
    Target(RouteTarget),
    /// A target that no longer exists (AWS: state `blackhole` with no gateway).
    Blackhole,
    /// Anything else (gateway, NAT, peering, the local route…), described for logs. The route
    /// controller never changes such a route.
    Other(String),
}

/// One route of a route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Where the route leads.
    pub destination: Cidr,
    /// Where it sends the traffic.
    pub next_hop: NextHop,
}

/// One route table and its routes (routes without a CIDR destination, such as prefix lists,
/// are left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTable {
    /// The table's ID, as passed back to the write calls.
    pub id: String,
    /// Its routes with CIDR destinations.
    pub routes: Vec<Route>,
}

/// Routes for pod CIDRs, as `k8s.io/cloud-provider`'s `Routes`, shaped for reconciliation over
/// several tables.
///
/// Contracts:
/// - `route_tables` returns every table that must hold the cluster's routes, in one consistent
///   read, and fails rather than returning an empty list when no table is found;
/// - writes are single-route and idempotent in effect: deleting a missing route succeeds;
/// - `prepare_target` is called before routes to a target are created or replaced; it may be
///   called again for the same target and should then cost nothing.
#[async_trait]
pub trait Routes: Send + Sync {
    /// The target a node's routes must point at; an error when the node cannot be a target yet
    /// (e.g. it has no provider ID).
    fn route_target(&self, node: &NodeInfo) -> Result<RouteTarget, CloudError>;
    /// Every route table of the cluster with its routes.
    async fn route_tables(&self) -> Result<Vec<RouteTable>, CloudError>;
    /// Makes the target able to forward pod traffic (AWS: disables the source/destination check).
    async fn prepare_target(&self, target: &RouteTarget) -> Result<(), CloudError>;
    /// Adds a route to `target` in `table`.
    async fn create_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError>;
    /// Points the existing route for `destination` in `table` at `target`.
    async fn replace_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError>;
    /// Removes the route for `destination` from `table`.
    async fn delete_route(&self, table: &str, destination: &Cidr) -> Result<(), CloudError>;
}
