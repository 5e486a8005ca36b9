//! Octavia's children of a load balancer — listeners, pools, members and health monitors — kept
//! as the JSON objects the API answers, with the rules that tie them to their load balancer:
//! a change to any child makes the load balancer PENDING_UPDATE, and its transition settles the
//! children (PENDING_* → ACTIVE, or ERROR with it); a cascade delete removes them all.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The children of every load balancer, id → object.
#[derive(Debug, Default)]
pub struct OctaviaTree {
    /// `listeners`.
    pub listeners: BTreeMap<String, Value>,
    /// `pools`.
    pub pools: BTreeMap<String, Value>,
    /// `members` (each carries `pool_id`).
    pub members: BTreeMap<String, Value>,
    /// `healthmonitors`.
    pub monitors: BTreeMap<String, Value>,
    /// Mutating Octavia requests still to be refused with 409 (a fault knob).
    pub conflicts: u32,
}

/// The load balancer a child belongs to (`loadbalancers[0].id`).
pub fn lb_of(child: &Value) -> Option<&str> {
    child["loadbalancers"][0]["id"].as_str()
}

impl OctaviaTree {
    /// Applies a load balancer's settled `provisioning_status` to its children.
    pub fn settle(&mut self, lb: &str, status: &str) {
        let operating = if status == "ACTIVE" {
            "ONLINE"
        } else {
            "ERROR"
        };
        for coll in [
            &mut self.listeners,
            &mut self.pools,
            &mut self.members,
            &mut self.monitors,
        ] {
            for child in coll.values_mut().filter(|c| lb_of(c) == Some(lb)) {
                if child["provisioning_status"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("PENDING_"))
                {
                    child["provisioning_status"] = json!(status);
                    child["operating_status"] = json!(operating);
                }
            }
        }
    }

    /// Removes every child of a load balancer (cascade delete finished).
    pub fn remove_all(&mut self, lb: &str) {
        for coll in [
            &mut self.listeners,
            &mut self.pools,
            &mut self.members,
            &mut self.monitors,
        ] {
            coll.retain(|_, c| lb_of(c) != Some(lb));
        }
    }

    /// Whether a load balancer has listeners or pools (a plain delete is refused then).
    pub fn has_children(&self, lb: &str) -> bool {
        self.listeners.values().any(|c| lb_of(c) == Some(lb))
            || self.pools.values().any(|c| lb_of(c) == Some(lb))
    }

    /// `[{id}]` of the listeners and pools of a load balancer, as its own object shows them.
    pub fn refs(&self, lb: &str) -> (Value, Value) {
        let ids = |coll: &BTreeMap<String, Value>| {
            Value::Array(
                coll.values()
                    .filter(|c| lb_of(c) == Some(lb))
                    .map(|c| json!({"id": c["id"]}))
                    .collect(),
            )
        };
        (ids(&self.listeners), ids(&self.pools))
    }

    /// Takes one injected 409, if any is left.
    pub fn take_conflict(&mut self) -> bool {
        if self.conflicts > 0 {
            self.conflicts -= 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_follow_their_load_balancer() {
        let mut tree = OctaviaTree::default();
        let child = |id: &str, lb: &str| {
            json!({"id": id, "loadbalancers": [{"id": lb}], "provisioning_status": "PENDING_CREATE",
                   "operating_status": "OFFLINE"})
        };
        tree.listeners.insert("l1".into(), child("l1", "a"));
        tree.pools.insert("p1".into(), child("p1", "a"));
        tree.pools.insert("p2".into(), child("p2", "b"));
        tree.settle("a", "ACTIVE");
        assert_eq!(tree.listeners["l1"]["provisioning_status"], "ACTIVE");
        assert_eq!(tree.pools["p2"]["provisioning_status"], "PENDING_CREATE");
        assert!(tree.has_children("a"));
        assert_eq!(tree.refs("a").0, json!([{"id": "l1"}]));
        tree.remove_all("a");
        assert!(!tree.has_children("a") && tree.has_children("b"));
        tree.conflicts = 1;
        assert!(tree.take_conflict() && !tree.take_conflict());
    }
}
