//! Device names for attachments: each node gets `/dev/xvdba`…`/dev/xvdcz` names that no
//! attached or in-flight volume of that node uses (the name is only a hint on Nitro instances,
//! but EC2 rejects a name already in use).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// The first free name among `/dev/xvd[b-c][a-z]` given the names in use, or `None` when all
/// 52 are taken.
pub fn first_free(in_use: &BTreeSet<String>) -> Option<String> {
    ('b'..='c')
        .flat_map(|a| ('a'..='z').map(move |b| format!("/dev/xvd{a}{b}")))
        .find(|name| !in_use.contains(name))
}

/// Names handed out but not yet visible in DescribeInstances, per node.
#[derive(Debug, Default)]
pub struct InFlight {
    names: Mutex<HashMap<String, BTreeSet<String>>>,
}

impl InFlight {
    /// Picks a free name for `node` avoiding `attached` and names in flight, and holds it.
    pub fn allocate(&self, node: &str, attached: &BTreeSet<String>) -> Option<String> {
        let mut names = self.names.lock().expect("device names");
        let held = names.entry(node.to_string()).or_default();
        let in_use: BTreeSet<String> = attached.union(held).cloned().collect();
        let name = first_free(&in_use)?;
        held.insert(name.clone());
        Some(name)
    }

    /// Releases a held name (the attachment finished or failed).
    pub fn release(&self, node: &str, name: &str) {
        let mut names = self.names.lock().expect("device names");
        if let Some(held) = names.get_mut(node) {
            held.remove(name);
            if held.is_empty() {
                names.remove(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_collide() {
        let attached: BTreeSet<String> = ["/dev/xvdba".to_string()].into_iter().collect();
        let f = InFlight::default();
        let a = f.allocate("i-1", &attached).unwrap();
        let b = f.allocate("i-1", &attached).unwrap();
        assert_eq!(a, "/dev/xvdbb");
        assert_eq!(b, "/dev/xvdbc");
        assert_eq!(f.allocate("i-2", &attached).unwrap(), "/dev/xvdbb");
        f.release("i-1", &a);
        assert_eq!(f.allocate("i-1", &attached).unwrap(), "/dev/xvdbb");
        let all: BTreeSet<String> = ('b'..='c')
            .flat_map(|x| ('a'..='z').map(move |y| format!("/dev/xvd{x}{y}")))
            .collect();
        assert_eq!(first_free(&all), None);
    }
}
