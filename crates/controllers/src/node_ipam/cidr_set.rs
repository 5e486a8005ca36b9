//! One cluster CIDR cut into equal node blocks, with a used bit per block: the lowest free block
//! is handed out first.

use stratus_cloud::Cidr;

/// Most blocks one cluster CIDR may be cut into, as a power of two (kube-controller-manager's
/// limit: the node mask may be at most 16 bits longer than the cluster CIDR's).
pub const MAX_BLOCK_BITS: u8 = 16;

/// Why a cluster CIDR and a node mask do not make a set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrSetError {
    #[error("node mask size {node} is shorter than the prefix of cluster CIDR {cluster}")]
    /// The node mask is shorter than the cluster CIDR's.
    MaskShorterThanCluster {
        /// The cluster CIDR.
        cluster: Cidr,
        /// The node mask size.
        node: u8,
    },
    #[error("node mask size {node} is longer than {max} bits")]
    /// The node mask is longer than the address family allows.
    MaskTooLong {
        /// The node mask size.
        node: u8,
        /// The family's width.
        max: u8,
    },
    #[error(
        "node mask size {node} cuts cluster CIDR {cluster} into more than 2^{MAX_BLOCK_BITS} node CIDRs"
    )]
    /// The cluster CIDR holds more node blocks than the allocator tracks.
    TooManyBlocks {
        /// The cluster CIDR.
        cluster: Cidr,
        /// The node mask size.
        node: u8,
    },
}

/// The node blocks of one cluster CIDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrSet {
    cluster: Cidr,
    node_prefix: u8,
    used: Vec<u64>,
    blocks: u32,
    in_use: u32,
}

impl CidrSet {
    /// Blocks of `/node_prefix` in `cluster`.
    pub fn new(cluster: Cidr, node_prefix: u8) -> Result<CidrSet, CidrSetError> {
        if node_prefix > cluster.max_prefix_len() {
            return Err(CidrSetError::MaskTooLong {
                node: node_prefix,
                max: cluster.max_prefix_len(),
            });
        }
        if node_prefix < cluster.prefix_len() {
            return Err(CidrSetError::MaskShorterThanCluster {
                cluster,
                node: node_prefix,
            });
        }
        let bits = node_prefix - cluster.prefix_len();
        if bits > MAX_BLOCK_BITS {
            return Err(CidrSetError::TooManyBlocks {
                cluster,
                node: node_prefix,
            });
        }
        let blocks = 1u32 << bits;
        Ok(CidrSet {
            cluster,
            node_prefix,
            used: vec![0; blocks.div_ceil(64) as usize],
            blocks,
            in_use: 0,
        })
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> &Cidr {
        &self.cluster
    }

    /// The node mask size.
    pub fn node_prefix(&self) -> u8 {
        self.node_prefix
    }

    /// How many node blocks the set has.
    pub fn capacity(&self) -> u32 {
        self.blocks
    }

    /// How many blocks are free.
    pub fn free(&self) -> u32 {
        self.blocks - self.in_use
    }

    /// Takes the lowest free block; `None` when every block is used.
    pub fn allocate(&mut self) -> Option<Cidr> {
        let (word, bits) = self
            .used
            .iter()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)?;
        let index = word as u32 * 64 + bits.trailing_ones();
        if index >= self.blocks {
            return None;
        }
        self.set(index, true);
        Some(self.block(index))
    }

    /// Marks the blocks `cidr` covers as used; false (and nothing marked) when `cidr` is not
    /// inside the cluster CIDR.
    pub fn occupy(&mut self, cidr: &Cidr) -> bool {
        let Some((first, last)) = self.block_range(cidr) else {
            return false;
        };
        for i in first..=last {
            self.set(i, true);
        }
        true
    }

    /// Marks the blocks `cidr` covers as free (nothing when it is not inside the cluster CIDR).
    pub fn release(&mut self, cidr: &Cidr) {
        if let Some((first, last)) = self.block_range(cidr) {
            for i in first..=last {
                self.set(i, false);
            }
        }
    }

    /// Whether `cidr` lies inside the cluster CIDR.
    pub fn contains(&self, cidr: &Cidr) -> bool {
        self.cluster.contains(cidr)
    }

    /// Whether every block `cidr` covers is used (false outside the cluster CIDR).
    pub fn is_used(&self, cidr: &Cidr) -> bool {
        self.block_range(cidr)
            .is_some_and(|(first, last)| (first..=last).all(|i| self.get(i)))
    }

    /// The first and last block `cidr` covers (a CIDR smaller than a block covers its block).
    fn block_range(&self, cidr: &Cidr) -> Option<(u32, u32)> {
        if !self.cluster.contains(cidr) {
            return None;
        }
        let shift = u32::from(self.cluster.max_prefix_len() - self.node_prefix);
        let first = ((cidr.bits() - self.cluster.bits()) >> shift) as u32;
        let span = if cidr.prefix_len() >= self.node_prefix {
            1
        } else {
            1u32 << (self.node_prefix - cidr.prefix_len())
        };
        Some((first, first + span - 1))
    }

    fn block(&self, index: u32) -> Cidr {
        let shift = u32::from(self.cluster.max_prefix_len() - self.node_prefix);
        let bits = self.cluster.bits() + (u128::from(index) << shift);
        Cidr::from_bits(self.cluster.is_ipv6(), bits, self.node_prefix)
            .expect("node prefix checked at construction")
    }

    fn get(&self, index: u32) -> bool {
        self.used[(index / 64) as usize] & (1u64 << (index % 64)) != 0
    }

    fn set(&mut self, index: u32, used: bool) {
        if self.get(index) == used {
            return;
        }
        let word = &mut self.used[(index / 64) as usize];
        *word ^= 1u64 << (index % 64);
        if used {
            self.in_use += 1;
        } else {
            self.in_use -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn validates_the_mask() {
        assert!(matches!(
            CidrSet::new(c("10.244.0.0/16"), 15),
            Err(CidrSetError::MaskShorterThanCluster { .. })
        ));
        assert!(matches!(
            CidrSet::new(c("10.244.0.0/16"), 33),
            Err(CidrSetError::MaskTooLong { max: 32, .. })
        ));
        assert!(matches!(
            CidrSet::new(c("10.0.0.0/8"), 25),
            Err(CidrSetError::TooManyBlocks { .. })
        ));
        assert_eq!(CidrSet::new(c("10.0.0.0/8"), 24).unwrap().capacity(), 65536);
        assert_eq!(CidrSet::new(c("10.0.0.0/24"), 24).unwrap().capacity(), 1);
        assert_eq!(
            CidrSet::new(c("fd00:10:244::/56"), 64).unwrap().capacity(),
            256
        );
    }

    #[test]
    fn hands_out_the_lowest_free_block_until_exhausted() {
        let mut s = CidrSet::new(c("10.244.0.0/22"), 24).unwrap();
        assert_eq!(s.allocate(), Some(c("10.244.0.0/24")));
        assert_eq!(s.allocate(), Some(c("10.244.1.0/24")));
        assert!(s.occupy(&c("10.244.3.0/24")));
        assert_eq!(s.allocate(), Some(c("10.244.2.0/24")));
        assert_eq!(s.free(), 0);
        assert_eq!(s.allocate(), None);
        s.release(&c("10.244.1.0/24"));
        assert_eq!(s.free(), 1);
        assert_eq!(s.allocate(), Some(c("10.244.1.0/24")));
    }

    #[test]
    fn ipv6_blocks() {
        let mut s = CidrSet::new(c("fd00:10:244::/63"), 64).unwrap();
        assert_eq!(s.allocate(), Some(c("fd00:10:244::/64")));
        assert_eq!(s.allocate(), Some(c("fd00:10:244:1::/64")));
        assert_eq!(s.allocate(), None);
    }

    #[test]
    fn occupy_covers_larger_and_smaller_cidrs_and_refuses_outsiders() {
        let mut s = CidrSet::new(c("10.244.0.0/16"), 24).unwrap();
        assert!(s.occupy(&c("10.244.0.0/23")));
        assert!(s.occupy(&c("10.244.2.128/25")));
        assert!(s.is_used(&c("10.244.1.0/24")));
        assert!(s.is_used(&c("10.244.2.0/24")));
        assert_eq!(s.free(), 256 - 3);
        assert_eq!(s.allocate(), Some(c("10.244.3.0/24")));
        assert!(!s.occupy(&c("10.245.0.0/24")));
        assert!(!s.occupy(&c("10.0.0.0/8")));
        assert!(!s.occupy(&c("fd00::/64")));
        assert_eq!(s.free(), 256 - 4);
        s.release(&c("10.245.0.0/24"));
        assert_eq!(s.free(), 256 - 4);
    }

    #[test]
    fn word_boundaries() {
        let mut s = CidrSet::new(c("10.0.0.0/16"), 23).unwrap();
        assert_eq!(s.capacity(), 128);
        for i in 0..128u32 {
            let got = s.allocate().unwrap();
            assert_eq!(got.bits(), 0x0a00_0000 + (u128::from(i) << 9), "{i}");
        }
        assert_eq!(s.allocate(), None);
        s.release(&c("10.0.130.0/23"));
        assert_eq!(s.allocate(), Some(c("10.0.130.0/23")));
    }
}
