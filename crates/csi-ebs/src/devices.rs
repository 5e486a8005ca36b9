//! Device names for attachments, remembered per node in the controller process: each node's
//! names in use are read from its instance once (its block device mappings), then every name
//! this process hands out is held for its volume until the volume detaches. The instance is read
//! again only when EC2 says a name is taken or the node is unknown (a restart). Names are
//! `/dev/xvdba`…`/dev/xvdcz` (only a hint on Nitro instances, but EC2 rejects a name in use).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

/// The first free name among `/dev/xvd[b-c][a-z]` given the names in use, or `None` when all
/// 52 are taken.
pub fn first_free(in_use: &BTreeSet<String>) -> Option<String> {
    ('b'..='c')
        .flat_map(|a| ('a'..='z').map(move |b| format!("/dev/xvd{a}{b}")))
        .find(|name| !in_use.contains(name))
}

#[derive(Debug, Default)]
struct NodeNames {
    /// Whether the instance was read since the process started or the names were doubted.
    fresh: bool,
    /// Device name → the volume holding it (empty when the instance did not say).
    names: BTreeMap<String, String>,
}

/// The device names of every node this process attaches to.
#[derive(Debug, Default)]
pub struct NodeDevices {
    nodes: Mutex<HashMap<String, NodeNames>>,
}

impl NodeDevices {
    fn with<T>(&self, node: &str, f: impl FnOnce(&mut NodeNames) -> T) -> T {
        let mut nodes = self.nodes.lock().expect("device names");
        f(nodes.entry(node.to_string()).or_default())
    }

    /// Whether the node's names are known (else its instance must be read first).
    pub fn knows(&self, node: &str) -> bool {
        self.nodes
            .lock()
            .expect("device names")
            .get(node)
            .is_some_and(|n| n.fresh)
    }

    /// Takes in the node's block device mappings (device → volume) as read from its instance;
    /// names held here stay held.
    pub fn learn(&self, node: &str, mappings: &BTreeMap<String, String>) {
        self.with(node, |n| {
            for (device, volume) in mappings {
                n.names
                    .entry(device.clone())
                    .or_insert_with(|| volume.clone());
            }
            n.fresh = true;
        });
    }

    /// Doubts the node's names: the next attach reads its instance again.
    pub fn forget(&self, node: &str) {
        self.with(node, |n| n.fresh = false);
    }

    /// The name `volume` holds on `node`, if any.
    pub fn device_of(&self, node: &str, volume: &str) -> Option<String> {
        let nodes = self.nodes.lock().expect("device names");
        let n = nodes.get(node)?;
        n.names
            .iter()
            .find(|(_, v)| v.as_str() == volume)
            .map(|(d, _)| d.clone())
    }

    /// Picks a free name on `node` and holds it for `volume`; `None` when all are taken.
    pub fn allocate(&self, node: &str, volume: &str) -> Option<String> {
        self.with(node, |n| {
            let in_use: BTreeSet<String> = n.names.keys().cloned().collect();
            let name = first_free(&in_use)?;
            n.names.insert(name.clone(), volume.to_string());
            Some(name)
        })
    }

    /// Holds `device` on `node` for `volume` (an attachment found in EC2).
    pub fn hold(&self, node: &str, volume: &str, device: &str) {
        self.with(node, |n| {
            n.names.insert(device.to_string(), volume.to_string());
        });
    }

    /// Frees the name `device` on `node` (its attach failed).
    pub fn release_name(&self, node: &str, device: &str) {
        self.with(node, |n| {
            n.names.remove(device);
        });
    }

    /// Frees every name `volume` holds on `node` (it detached).
    pub fn release(&self, node: &str, volume: &str) {
        self.with(node, |n| n.names.retain(|_, v| v != volume));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_collide_and_come_back_on_detach() {
        let d = NodeDevices::default();
        assert!(!d.knows("i-1"));
        let root: BTreeMap<String, String> = [
            ("/dev/xvda".to_string(), "vol-root".to_string()),
            ("/dev/xvdba".to_string(), "vol-old".to_string()),
        ]
        .into();
        d.learn("i-1", &root);
        assert!(d.knows("i-1"));
        assert_eq!(d.allocate("i-1", "vol-a").unwrap(), "/dev/xvdbb");
        assert_eq!(d.allocate("i-1", "vol-b").unwrap(), "/dev/xvdbc");
        assert_eq!(d.device_of("i-1", "vol-b").as_deref(), Some("/dev/xvdbc"));
        assert_eq!(d.device_of("i-1", "vol-old").as_deref(), Some("/dev/xvdba"));
        // The volume attached before a restart detaches: its name is free again.
        d.release("i-1", "vol-old");
        assert_eq!(d.allocate("i-1", "vol-c").unwrap(), "/dev/xvdba");
        // A failed attach gives its name back.
        d.release_name("i-1", "/dev/xvdba");
        assert_eq!(d.device_of("i-1", "vol-c"), None);
        // Re-reading the instance keeps what this process holds.
        d.forget("i-1");
        assert!(!d.knows("i-1"));
        d.learn("i-1", &BTreeMap::new());
        assert_eq!(d.device_of("i-1", "vol-a").as_deref(), Some("/dev/xvdbb"));
        let all: BTreeSet<String> = ('b'..='c')
            .flat_map(|x| ('a'..='z').map(move |y| format!("/dev/xvd{x}{y}")))
            .collect();
        assert_eq!(first_free(&all), None);
    }
}
