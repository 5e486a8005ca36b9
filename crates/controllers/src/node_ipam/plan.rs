//! Pure decisions of the node-ipam controller, as kube-controller-manager's range allocator:
//! CIDRs of existing nodes are marked used, a node without pod CIDRs gets the lowest free block
//! of each cluster CIDR, and a deleted node's blocks are free again.
//!
//! The allocator remembers who holds what. A node is recognised by name and UID, so a node
//! deleted and created again under the same name is a new node. An allocation is held from the
//! moment it is planned: if writing it fails, the driver calls [`RangeAllocator::undo`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use stratus_cloud::Cidr;

use super::cidr_set::CidrSet;

/// What the allocator needs to know about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCidrs {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`, the precondition of the write.
    pub resource_version: Option<String>,
    /// `spec.podCIDRs` (or `spec.podCIDR`) as written.
    pub pod_cidrs: Vec<String>,
}

impl NodeCidrs {
    /// The allocator's view of a Node.
    pub fn of(node: &Node) -> NodeCidrs {
        let spec = node.spec.as_ref();
        let pod_cidrs = match spec.and_then(|s| s.pod_cidrs.as_ref()) {
            Some(list) if !list.is_empty() => list.clone(),
            _ => spec
                .and_then(|s| s.pod_cidr.clone())
                .filter(|c| !c.is_empty())
                .into_iter()
                .collect(),
        };
        NodeCidrs {
            name: node.metadata.name.clone().unwrap_or_default(),
            uid: node.metadata.uid.clone().unwrap_or_default(),
            resource_version: node.metadata.resource_version.clone(),
            pod_cidrs,
        }
    }
}

/// CIDRs to write to a node: one per cluster CIDR, in `--cluster-cidr` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The node.
    pub name: String,
    /// Its UID (a node re-created under the same name is another node).
    pub uid: String,
    /// The resourceVersion the plan saw.
    pub resource_version: Option<String>,
    /// The pod CIDRs to write, one per cluster CIDR.
    pub cidrs: Vec<Cidr>,
}

/// Something to tell the operator about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// No free block left in `range` for a node without pod CIDRs.
    Exhausted {
        /// The node.
        name: String,
        /// Its UID.
        uid: String,
        /// The exhausted cluster CIDR.
        range: Cidr,
    },
    /// The node's pod CIDRs are not inside any cluster CIDR; they are left as they are.
    Outside {
        /// The node.
        name: String,
        /// Its UID.
        uid: String,
        /// Its pod CIDRs, as written.
        cidrs: Vec<String>,
    },
    /// The node's pod CIDRs include text that is not a CIDR.
    Invalid {
        /// The node.
        name: String,
        /// Its UID.
        uid: String,
        /// The text that is not a CIDR.
        text: String,
    },
}

impl Report {
    /// The node the report is about: `(name, uid)`.
    pub fn node(&self) -> (&str, &str) {
        match self {
            Report::Exhausted { name, uid, .. }
            | Report::Outside { name, uid, .. }
            | Report::Invalid { name, uid, .. } => (name, uid),
        }
    }
}

/// The outcome of one pass over the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pass {
    /// The writes to make.
    pub allocations: Vec<Allocation>,
    /// What to tell people about.
    pub reports: Vec<Report>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Holding {
    uid: String,
    cidrs: Vec<Cidr>,
}

/// The range allocator over one cluster CIDR per address family.
#[derive(Debug, Clone)]
pub struct RangeAllocator {
    sets: Vec<CidrSet>,
    holders: BTreeMap<String, Holding>,
}

impl RangeAllocator {
    /// An allocator over `sets` (one per cluster CIDR, in flag order), with nothing used yet.
    pub fn new(sets: Vec<CidrSet>) -> RangeAllocator {
        RangeAllocator {
            sets,
            holders: BTreeMap::new(),
        }
    }

    /// Brings the allocator up to the nodes that exist now and plans CIDRs for nodes without.
    ///
    /// In order: blocks of gone (or re-created) nodes are released, CIDRs that nodes carry are
    /// marked used, and only then are nodes without pod CIDRs given the lowest free blocks, so
    /// an allocation never takes a CIDR some node already carries.
    pub fn pass(&mut self, nodes: &[NodeCidrs]) -> Pass {
        let mut out = Pass::default();
        let by_name: BTreeMap<&str, &NodeCidrs> =
            nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let stale: Vec<String> = self
            .holders
            .iter()
            .filter(|(name, h)| match by_name.get(name.as_str()) {
                None => true,
                Some(n) => n.uid != h.uid || (!n.pod_cidrs.is_empty() && parse(n).0 != h.cidrs),
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            self.release(&name);
        }
        for node in by_name.values().filter(|n| !n.pod_cidrs.is_empty()) {
            if self.holders.contains_key(&node.name) {
                continue;
            }
            let (cidrs, bad) = parse(node);
            if let Some(text) = bad.into_iter().next() {
                out.reports.push(Report::Invalid {
                    name: node.name.clone(),
                    uid: node.uid.clone(),
                    text,
                });
            }
            let outside: Vec<String> = cidrs
                .iter()
                .filter(|c| !self.occupy(c))
                .map(Cidr::to_string)
                .collect();
            if !outside.is_empty() {
                out.reports.push(Report::Outside {
                    name: node.name.clone(),
                    uid: node.uid.clone(),
                    cidrs: outside,
                });
            }
            self.holders.insert(
                node.name.clone(),
                Holding {
                    uid: node.uid.clone(),
                    cidrs,
                },
            );
        }
        for node in by_name.values().filter(|n| n.pod_cidrs.is_empty()) {
            if self
                .holders
                .get(&node.name)
                .is_some_and(|h| h.uid == node.uid)
            {
                // Our write is done; the watch has not shown it yet.
                continue;
            }
            match self.allocate() {
                Ok(cidrs) => {
                    self.holders.insert(
                        node.name.clone(),
                        Holding {
                            uid: node.uid.clone(),
                            cidrs: cidrs.clone(),
                        },
                    );
                    out.allocations.push(Allocation {
                        name: node.name.clone(),
                        uid: node.uid.clone(),
                        resource_version: node.resource_version.clone(),
                        cidrs,
                    });
                }
                Err(range) => out.reports.push(Report::Exhausted {
                    name: node.name.clone(),
                    uid: node.uid.clone(),
                    range,
                }),
            }
        }
        out
    }

    /// Gives back an allocation whose write failed (the node is planned again next pass).
    pub fn undo(&mut self, name: &str, uid: &str) {
        if self.holders.get(name).is_some_and(|h| h.uid == uid) {
            self.release(name);
        }
    }

    /// Free blocks per cluster CIDR, in flag order.
    pub fn free(&self) -> Vec<u32> {
        self.sets.iter().map(CidrSet::free).collect()
    }

    /// One block of every set, or the range that is exhausted (nothing is then taken).
    fn allocate(&mut self) -> Result<Vec<Cidr>, Cidr> {
        let mut taken = Vec::with_capacity(self.sets.len());
        for i in 0..self.sets.len() {
            match self.sets[i].allocate() {
                Some(c) => taken.push(c),
                None => {
                    let range = *self.sets[i].cluster();
                    for (set, c) in self.sets.iter_mut().zip(&taken) {
                        set.release(c);
                    }
                    return Err(range);
                }
            }
        }
        Ok(taken)
    }

    /// Marks `cidr` used in the set that contains it; false when no set does.
    fn occupy(&mut self, cidr: &Cidr) -> bool {
        self.sets
            .iter_mut()
            .find(|s| s.contains(cidr))
            .is_some_and(|s| s.occupy(cidr))
    }

    /// Forgets a holder and frees its blocks, except where another holder's CIDRs overlap.
    fn release(&mut self, name: &str) {
        let Some(gone) = self.holders.remove(name) else {
            return;
        };
        for cidr in &gone.cidrs {
            if let Some(set) = self.sets.iter_mut().find(|s| s.contains(cidr)) {
                set.release(cidr);
            }
        }
        let overlapping: Vec<Cidr> = self
            .holders
            .values()
            .flat_map(|h| h.cidrs.iter())
            .filter(|c| gone.cidrs.iter().any(|g| g.overlaps(c)))
            .copied()
            .collect();
        for c in overlapping {
            self.occupy(&c);
        }
    }
}

/// A node's pod CIDRs, parsed; texts that are not CIDRs apart.
fn parse(node: &NodeCidrs) -> (Vec<Cidr>, Vec<String>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for t in &node.pod_cidrs {
        match Cidr::parse(t) {
            Ok(c) => good.push(c),
            Err(_) => bad.push(t.clone()),
        }
    }
    (good, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    fn allocator(ranges: &[(&str, u8)]) -> RangeAllocator {
        RangeAllocator::new(
            ranges
                .iter()
                .map(|(r, m)| CidrSet::new(c(r), *m).unwrap())
                .collect(),
        )
    }

    fn node(name: &str, cidrs: &[&str]) -> NodeCidrs {
        NodeCidrs {
            name: name.to_string(),
            uid: format!("uid-{name}"),
            resource_version: Some("1".into()),
            pod_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The nodes as they are once the planned allocations are written.
    fn written(nodes: &mut [NodeCidrs], pass: &Pass) {
        for a in &pass.allocations {
            let n = nodes.iter_mut().find(|n| n.name == a.name).unwrap();
            n.pod_cidrs = a.cidrs.iter().map(Cidr::to_string).collect();
        }
    }

    fn cidrs_of(pass: &Pass, name: &str) -> Vec<String> {
        pass.allocations
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.cidrs.iter().map(Cidr::to_string).collect())
            .unwrap_or_default()
    }

    #[test]
    fn existing_cidrs_are_kept_and_new_nodes_get_the_lowest_free() {
        let mut a = allocator(&[("10.244.0.0/16", 24)]);
        let nodes = vec![
            node("old", &["10.244.0.0/24"]),
            node("new-a", &[]),
            node("new-b", &[]),
        ];
        let pass = a.pass(&nodes);
        assert_eq!(pass.reports, vec![]);
        assert_eq!(cidrs_of(&pass, "new-a"), vec!["10.244.1.0/24"]);
        assert_eq!(cidrs_of(&pass, "new-b"), vec!["10.244.2.0/24"]);
        assert_eq!(pass.allocations[0].resource_version.as_deref(), Some("1"));
        // Until the watch shows the written CIDRs, the nodes are not planned again.
        assert_eq!(a.pass(&nodes), Pass::default());
    }

    #[test]
    fn dual_stack_gets_one_cidr_per_family_in_flag_order() {
        let mut a = allocator(&[("fd00:10:244::/56", 64), ("10.244.0.0/16", 24)]);
        let pass = a.pass(&[node("n", &[])]);
        assert_eq!(
            cidrs_of(&pass, "n"),
            vec!["fd00:10:244::/64", "10.244.0.0/24"]
        );
    }

    #[test]
    fn exhaustion_is_reported_and_a_deleted_node_frees_its_blocks() {
        // IPv6 first: its block is taken before the IPv4 range turns out to be full.
        let mut a = allocator(&[("fd00:10:244::/62", 64), ("10.244.0.0/23", 24)]);
        let mut nodes = vec![node("a", &[]), node("b", &[]), node("c", &[])];
        let pass = a.pass(&nodes);
        assert_eq!(pass.allocations.len(), 2);
        assert_eq!(
            pass.reports,
            vec![Report::Exhausted {
                name: "c".into(),
                uid: "uid-c".into(),
                range: c("10.244.0.0/23"),
            }]
        );
        // The IPv6 block taken before the IPv4 range ran out was given back.
        assert_eq!(a.free(), vec![2, 0]);
        written(&mut nodes, &pass);
        let freed = nodes.remove(0);
        let pass = a.pass(&nodes);
        assert_eq!(cidrs_of(&pass, "c"), freed.pod_cidrs);
    }

    #[test]
    fn a_recreated_node_is_a_new_node() {
        let mut a = allocator(&[("10.244.0.0/16", 24)]);
        let mut nodes = vec![node("n", &[])];
        let pass = a.pass(&nodes);
        written(&mut nodes, &pass);
        assert_eq!(a.pass(&nodes), Pass::default());
        nodes[0] = NodeCidrs {
            uid: "uid-n-2".into(),
            ..node("n", &[])
        };
        let pass = a.pass(&nodes);
        assert_eq!(cidrs_of(&pass, "n"), vec!["10.244.0.0/24"]);
    }

    #[test]
    fn failed_writes_are_undone() {
        let mut a = allocator(&[("10.244.0.0/24", 24)]);
        let nodes = vec![node("n", &[])];
        let pass = a.pass(&nodes);
        assert_eq!(a.free(), vec![0]);
        a.undo("n", "uid-n");
        assert_eq!(a.free(), vec![1]);
        a.undo("n", "uid-n");
        assert_eq!(cidrs_of(&a.pass(&nodes), "n"), cidrs_of(&pass, "n"));
    }

    #[test]
    fn outside_and_invalid_cidrs_are_reported_and_kept() {
        let mut a = allocator(&[("10.244.0.0/16", 24)]);
        let nodes = vec![
            node("far", &["192.168.7.0/24"]),
            node("junk", &["nonsense"]),
            node("new", &[]),
        ];
        let pass = a.pass(&nodes);
        assert_eq!(
            pass.reports,
            vec![
                Report::Outside {
                    name: "far".into(),
                    uid: "uid-far".into(),
                    cidrs: vec!["192.168.7.0/24".into()],
                },
                Report::Invalid {
                    name: "junk".into(),
                    uid: "uid-junk".into(),
                    text: "nonsense".into(),
                },
            ]
        );
        assert_eq!(cidrs_of(&pass, "new"), vec!["10.244.0.0/24"]);
        assert!(pass.allocations.iter().all(|al| al.name == "new"));
        // Reported once: the holders are remembered.
        assert_eq!(a.pass(&nodes).reports, vec![]);
    }

    #[test]
    fn a_block_shared_by_two_nodes_stays_used_until_both_are_gone() {
        let mut a = allocator(&[("10.244.0.0/23", 24)]);
        let mut nodes = vec![node("x", &["10.244.0.0/24"]), node("y", &["10.244.0.0/24"])];
        a.pass(&nodes);
        assert_eq!(a.free(), vec![1]);
        nodes.remove(0);
        a.pass(&nodes);
        assert_eq!(a.free(), vec![1]);
        nodes.clear();
        a.pass(&nodes);
        assert_eq!(a.free(), vec![2]);
    }

    #[test]
    fn reads_nodes() {
        let mut n = Node::default();
        n.metadata.name = Some("n".into());
        n.metadata.uid = Some("u".into());
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            pod_cidr: Some("10.244.1.0/24".into()),
            ..Default::default()
        });
        assert_eq!(NodeCidrs::of(&n).pod_cidrs, vec!["10.244.1.0/24"]);
        n.spec.as_mut().unwrap().pod_cidrs = Some(vec!["10.244.2.0/24".into()]);
        assert_eq!(NodeCidrs::of(&n).pod_cidrs, vec!["10.244.2.0/24"]);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Add,
        Delete(usize),
        WriteFails,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => Just(Step::Add),
            2 => (0usize..32).prop_map(Step::Delete),
            1 => Just(Step::WriteFails),
        ]
    }

    proptest! {
        /// Whatever nodes come and go, and whichever writes fail: no CIDR is ever held by two
        /// nodes, every node gets one CIDR per family while blocks remain, and the free count
        /// always matches the nodes that hold blocks.
        #[test]
        fn never_allocates_twice(steps in proptest::collection::vec(step(), 1..60)) {
            let mut a = allocator(&[("10.244.0.0/20", 24), ("fd00:10:244::/60", 64)]);
            let mut nodes: Vec<NodeCidrs> = Vec::new();
            let mut next = 0;
            let mut fail_next = false;
            for s in steps {
                match s {
                    Step::Add => {
                        nodes.push(node(&format!("n{next}"), &[]));
                        next += 1;
                    }
                    Step::Delete(i) if !nodes.is_empty() => {
                        let i = i % nodes.len();
                        nodes.remove(i);
                    }
                    Step::Delete(_) => {}
                    Step::WriteFails => fail_next = true,
                }
                let pass = a.pass(&nodes);
                let failed = std::mem::take(&mut fail_next);
                for al in &pass.allocations {
                    if failed {
                        a.undo(&al.name, &al.uid);
                    } else {
                        let n = nodes.iter_mut().find(|n| n.name == al.name).unwrap();
                        n.pod_cidrs = al.cidrs.iter().map(Cidr::to_string).collect();
                    }
                }
                let mut seen = BTreeSet::new();
                for n in nodes.iter().filter(|n| !n.pod_cidrs.is_empty()) {
                    prop_assert_eq!(n.pod_cidrs.len(), 2);
                    for cidr in &n.pod_cidrs {
                        prop_assert!(seen.insert(cidr.clone()), "{} given twice", cidr);
                    }
                }
                let holding = nodes.iter().filter(|n| !n.pod_cidrs.is_empty()).count() as u32;
                prop_assert_eq!(a.free(), vec![16 - holding, 16 - holding]);
                let waiting = nodes.len() as u32 - holding;
                if !failed {
                    prop_assert!(waiting == 0 || holding == 16, "{} waiting, {} held", waiting, holding);
                }
            }
        }
    }
}
