//! Label keys and values shared by Deckhouse's DVP components (CCM, CSI, capdvp): one constant
//! each, never a string literal elsewhere.

/// On a VirtualMachine: the tenant Node name it backs (the CCM finds a node's VM by it).
pub const HOSTNAME: &str = "dvp.deckhouse.io/hostname";
/// On parent objects: the tenant cluster's UUID.
pub const CLUSTER_UUID: &str = "dvp.deckhouse.io/cluster-uuid";
/// On parent objects Deckhouse manages.
pub const MANAGED_BY: &str = "deckhouse.io/managed-by";
/// The value of [`MANAGED_BY`].
pub const MANAGED_BY_DECKHOUSE: &str = "deckhouse";
/// Prefix of the per-load-balancer VM label: `dvp.deckhouse.io/<lb name>: loadbalancer`.
pub const LB_LABEL_PREFIX: &str = "dvp.deckhouse.io/";
/// The value of a per-load-balancer VM label.
pub const LB_LABEL_VALUE: &str = "loadbalancer";

/// The VM label key that selects the VMs behind the parent load balancer `lb_name`.
pub fn lb_selector_key(lb_name: &str) -> String {
    format!("{LB_LABEL_PREFIX}{lb_name}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn lb_selector_key_is_prefixed() {
        assert_eq!(super::lb_selector_key("a1b2"), "dvp.deckhouse.io/a1b2");
    }
}
