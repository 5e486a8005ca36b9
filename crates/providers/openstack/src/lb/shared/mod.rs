//! Shared load balancers (`loadbalancer.openstack.org/load-balancer-id`), as OCCM: a Service
//! joins an existing load balancer by its id, tags it with its own load-balancer name (at most
//! `max-shared-lb` Services per load balancer; internal Services cannot join one they do not
//! own), and adds listeners tagged with that name. It owns only those listeners and their pools:
//! others' listeners and pools are never touched, and a listener port another one uses is an
//! error. On deletion the load balancer goes only when no other Service is tagged on it and it
//! was made by a cluster (`kube_service_` name); else only the Service's listeners and pools go,
//! and its tag. Pure decisions.

use serde_json::Value;

use super::spec::{ActualTree, LbSpec};

/// Prefix of every OCCM load-balancer name and Service tag.
pub const SERVICE_PREFIX: &str = "kube_service_";

fn tags(lb: &Value) -> Vec<String> {
    lb["tags"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Why a Service may not join a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// `max-shared-lb` reached.
    #[error("load balancer {id} already shared with {count} Services (max-shared-lb = {max})")]
    Full {
        /// Load balancer id.
        id: String,
        /// Services on it.
        count: usize,
        /// The limit.
        max: u32,
    },
    /// An internal Service would be exposed through another Service's floating IP.
    #[error("an internal Service cannot share load balancer {0} it does not own")]
    Internal(String),
}

/// Whether `name` may use load balancer `lb`: `Ok(true)` when it owns it (named after it).
pub fn may_join(lb: &Value, name: &str, max: u32, internal: bool) -> Result<bool, ShareError> {
    if lb["name"] == name {
        return Ok(true);
    }
    let id = lb["id"].as_str().unwrap_or_default().to_owned();
    if internal {
        return Err(ShareError::Internal(id));
    }
    let tags = tags(lb);
    let count = tags
        .iter()
        .filter(|t| t.starts_with(SERVICE_PREFIX))
        .count();
    if !tags.iter().any(|t| t == name) && count + 1 > max as usize {
        return Err(ShareError::Full { id, count, max });
    }
    Ok(false)
}

/// The load balancer's tags with `name` added (None: it has it already).
pub fn tags_with(lb: &Value, name: &str) -> Option<Vec<String>> {
    let mut t = tags(lb);
    if t.iter().any(|x| x == name) {
        return None;
    }
    t.push(name.to_owned());
    Some(t)
}

/// The load balancer's tags without `name` (None: it does not have it).
pub fn tags_without(lb: &Value, name: &str) -> Option<Vec<String>> {
    let t = tags(lb);
    if !t.iter().any(|x| x == name) {
        return None;
    }
    Some(t.into_iter().filter(|x| x != name).collect())
}

/// Whether deleting Service `name` deletes the whole load balancer: no other Service is tagged
/// on it, and a cluster made it (its name starts with `kube_service_`).
pub fn delete_whole(lb: &Value, name: &str) -> bool {
    let others = tags(lb)
        .iter()
        .any(|t| t != name && t.starts_with(SERVICE_PREFIX));
    !others
        && lb["name"]
            .as_str()
            .is_some_and(|n| n.starts_with(SERVICE_PREFIX))
}

fn is_ours(listener: &Value, name: &str, owner: bool) -> bool {
    let t = tags(listener);
    t.iter().any(|x| x == name) || (owner && t.is_empty())
}

fn pool_is_ours(pool: &Value, name: &str, owner: bool) -> bool {
    let n = pool["name"].as_str().unwrap_or_default();
    n.ends_with(&format!("_{name}")) || (owner && !n.contains(SERVICE_PREFIX))
}

/// The part of a load balancer's tree that Service `name` manages: its listeners (tagged with
/// its name, or untagged when it owns the load balancer) and its loose pools.
pub fn ours(tree: ActualTree, name: &str, owner: bool) -> ActualTree {
    ActualTree {
        listeners: tree
            .listeners
            .into_iter()
            .filter(|l| is_ours(&l.listener, name, owner))
            .collect(),
        loose_pools: tree
            .loose_pools
            .into_iter()
            .filter(|p| pool_is_ours(p, name, owner))
            .collect(),
    }
}

/// The desired listener ports another Service's (or a user's) listener holds already.
pub fn port_conflicts(tree: &ActualTree, desired: &LbSpec, name: &str, owner: bool) -> Vec<u16> {
    desired
        .listeners
        .iter()
        .filter(|d| {
            tree.listeners.iter().any(|a| {
                !is_ours(&a.listener, name, owner)
                    && a.listener["protocol_port"].as_u64() == Some(u64::from(d.port))
            })
        })
        .map(|d| d.port)
        .collect()
}

#[cfg(test)]
mod tests;
