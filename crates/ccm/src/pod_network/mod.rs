//! The pod-network flags, parsed and checked together as kube-controller-manager does:
//! `--cluster-cidr`, the node mask sizes, `--cidr-allocator-type` and `--allocate-node-cidrs`.

use stratus_cloud::Cidr;
use stratus_controllers::node_ipam::cidr_set::CidrSet;

/// Node mask size of IPv4 cluster CIDRs when no flag sets it.
pub const DEFAULT_NODE_MASK_IPV4: u8 = 24;
/// Node mask size of IPv6 cluster CIDRs when no flag sets it.
pub const DEFAULT_NODE_MASK_IPV6: u8 = 64;
/// The only `--cidr-allocator-type` Stratus implements.
pub const RANGE_ALLOCATOR: &str = "RangeAllocator";

/// `--cluster-cidr`: none, one CIDR, or one IPv4 and one IPv6 CIDR (dual-stack), in flag order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterCidrs(pub Vec<Cidr>);

/// Parses `--cluster-cidr` (comma-separated); empty means unset.
pub fn parse_cluster_cidrs(text: &str) -> Result<ClusterCidrs, String> {
    if text.trim().is_empty() {
        return Ok(ClusterCidrs::default());
    }
    let cidrs = text
        .split(',')
        .map(|part| Cidr::parse(part).map_err(|e| e.to_string()))
        .collect::<Result<Vec<Cidr>, String>>()?;
    match cidrs.as_slice() {
        [_] => {}
        [a, b] if a.is_ipv6() != b.is_ipv6() => {}
        [_, _] => return Err("two CIDRs must be one IPv4 and one IPv6 (dual-stack)".to_string()),
        _ => {
            return Err(format!(
                "at most two CIDRs (one IPv4 and one IPv6) are allowed, got {}",
                cidrs.len()
            ))
        }
    }
    Ok(ClusterCidrs(cidrs))
}

/// Parses `--cidr-allocator-type`: only `RangeAllocator`.
pub fn parse_allocator_type(text: &str) -> Result<String, String> {
    if text == RANGE_ALLOCATOR {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not supported: Stratus implements only {RANGE_ALLOCATOR} (CloudAllocator and others are not available)"
        ))
    }
}

/// The node mask flags as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaskFlags {
    /// `--node-cidr-mask-size` (single-stack only).
    pub legacy: Option<u8>,
    /// `--node-cidr-mask-size-ipv4`.
    pub ipv4: Option<u8>,
    /// `--node-cidr-mask-size-ipv6`.
    pub ipv6: Option<u8>,
}

/// What the pod-network flags ask for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodNetwork {
    /// `--cluster-cidr` (may be empty).
    pub cluster_cidrs: Vec<Cidr>,
    /// With `--allocate-node-cidrs`: each cluster CIDR with its node mask size.
    pub allocate: Option<Vec<(Cidr, u8)>>,
}

/// Checks the flags together. Mask sizes matter (and are checked) only when allocating, so a
/// route-only install that passes upstream's mask flags keeps working.
pub fn pod_network(
    cluster: &ClusterCidrs,
    allocate_node_cidrs: bool,
    masks: MaskFlags,
) -> Result<PodNetwork, String> {
    let mut out = PodNetwork {
        cluster_cidrs: cluster.0.clone(),
        allocate: None,
    };
    if !allocate_node_cidrs {
        return Ok(out);
    }
    if cluster.0.is_empty() {
        return Err("--allocate-node-cidrs=true needs --cluster-cidr".to_string());
    }
    let sizes = node_mask_sizes(&cluster.0, masks)?;
    let mut ranges = Vec::new();
    for (cidr, (mask, flag)) in cluster.0.iter().zip(sizes) {
        CidrSet::new(*cidr, mask).map_err(|e| format!("{flag}: {e}"))?;
        ranges.push((*cidr, mask));
    }
    out.allocate = Some(ranges);
    Ok(out)
}

/// The node mask size of each cluster CIDR, with the flag it comes from (kube-controller-manager's
/// rules: `--node-cidr-mask-size` is for single-stack clusters only and excludes the per-family
/// flags; a per-family flag must match a cluster CIDR's family).
fn node_mask_sizes(cidrs: &[Cidr], m: MaskFlags) -> Result<Vec<(u8, &'static str)>, String> {
    let dual = cidrs.len() > 1;
    let has_v6 = cidrs.iter().any(Cidr::is_ipv6);
    let has_v4 = cidrs.iter().any(|c| !c.is_ipv6());
    if let Some(size) = m.legacy {
        if dual {
            return Err(
                "--node-cidr-mask-size is not allowed with a dual-stack --cluster-cidr; use --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6"
                    .to_string(),
            );
        }
        if m.ipv4.is_some() || m.ipv6.is_some() {
            return Err(
                "--node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 are not allowed together with --node-cidr-mask-size"
                    .to_string(),
            );
        }
        return Ok(vec![(size, "--node-cidr-mask-size")]);
    }
    if m.ipv4.is_some() && !has_v4 {
        return Err(
            "--node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 --cluster-cidr"
                .to_string(),
        );
    }
    if m.ipv6.is_some() && !has_v6 {
        return Err(
            "--node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 --cluster-cidr"
                .to_string(),
        );
    }
    Ok(cidrs
        .iter()
        .map(|c| {
            if c.is_ipv6() {
                (
                    m.ipv6.unwrap_or(DEFAULT_NODE_MASK_IPV6),
                    "--node-cidr-mask-size-ipv6",
                )
            } else {
                (
                    m.ipv4.unwrap_or(DEFAULT_NODE_MASK_IPV4),
                    "--node-cidr-mask-size-ipv4",
                )
            }
        })
        .collect())
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(text: &str) -> ClusterCidrs {
        parse_cluster_cidrs(text).unwrap()
    }

    fn c(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn cluster_cidr_flag() {
        assert_eq!(cidrs(""), ClusterCidrs::default());
        assert_eq!(cidrs("10.244.0.0/16").0, vec![c("10.244.0.0/16")]);
        assert_eq!(
            cidrs("fd00:10:244::/56, 10.244.0.0/16").0,
            vec![c("fd00:10:244::/56"), c("10.244.0.0/16")]
        );
        for bad in [
            "10.244.0.0",
            "10.244.0.0/16,",
            "10.244.0.0/16,10.245.0.0/16",
            "10.0.0.0/8,fd00::/56,10.1.0.0/16",
            "10.244.0.0/40",
        ] {
            assert!(parse_cluster_cidrs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allocator_type_flag() {
        assert_eq!(
            parse_allocator_type("RangeAllocator").unwrap(),
            "RangeAllocator"
        );
        let e = parse_allocator_type("CloudAllocator").unwrap_err();
        assert!(
            e.contains("CloudAllocator") && e.contains("RangeAllocator"),
            "{e}"
        );
    }

    #[test]
    fn masks_follow_kube_controller_manager_rules() {
        let v4 = cidrs("10.244.0.0/16");
        let v6 = cidrs("fd00:10:244::/56");
        let dual = cidrs("10.244.0.0/16,fd00:10:244::/56");
        let ok =
            |cl: &ClusterCidrs, m: MaskFlags| pod_network(cl, true, m).unwrap().allocate.unwrap();
        assert_eq!(
            ok(&v4, MaskFlags::default()),
            vec![(c("10.244.0.0/16"), 24)]
        );
        assert_eq!(
            ok(&v6, MaskFlags::default()),
            vec![(c("fd00:10:244::/56"), 64)]
        );
        assert_eq!(
            ok(
                &dual,
                MaskFlags {
                    ipv4: Some(25),
                    ipv6: Some(60),
                    legacy: None
                }
            ),
            vec![(c("10.244.0.0/16"), 25), (c("fd00:10:244::/56"), 60)]
        );
        assert_eq!(
            ok(
                &v4,
                MaskFlags {
                    legacy: Some(26),
                    ..MaskFlags::default()
                }
            ),
            vec![(c("10.244.0.0/16"), 26)]
        );
        let err = |cl: &ClusterCidrs, m: MaskFlags| pod_network(cl, true, m).unwrap_err();
        assert!(err(
            &dual,
            MaskFlags {
                legacy: Some(24),
                ..MaskFlags::default()
            }
        )
        .contains("dual-stack"));
        assert!(err(
            &v4,
            MaskFlags {
                legacy: Some(24),
                ipv4: Some(24),
                ipv6: None
            }
        )
        .contains("not allowed together"));
        assert!(err(
            &v4,
            MaskFlags {
                ipv6: Some(64),
                ..MaskFlags::default()
            }
        )
        .contains("--node-cidr-mask-size-ipv6"));
        assert!(err(
            &v6,
            MaskFlags {
                ipv4: Some(24),
                ..MaskFlags::default()
            }
        )
        .contains("--node-cidr-mask-size-ipv4"));
        let e = err(
            &v4,
            MaskFlags {
                ipv4: Some(8),
                ..MaskFlags::default()
            },
        );
        assert!(
            e.starts_with("--node-cidr-mask-size-ipv4:") && e.contains("shorter"),
            "{e}"
        );
        let e = err(&cidrs("10.0.0.0/7"), MaskFlags::default());
        assert!(e.contains("2^16"), "{e}");
        assert!(
            pod_network(&ClusterCidrs::default(), true, MaskFlags::default())
                .unwrap_err()
                .contains("--cluster-cidr")
        );
    }

    #[test]
    fn masks_are_not_checked_without_allocation() {
        let n = pod_network(
            &cidrs("10.244.0.0/16,fd00:10:244::/56"),
            false,
            MaskFlags {
                legacy: Some(24),
                ..MaskFlags::default()
            },
        )
        .unwrap();
        assert_eq!(n.cluster_cidrs.len(), 2);
        assert_eq!(n.allocate, None);
        assert_eq!(
            pod_network(&ClusterCidrs::default(), false, MaskFlags::default()).unwrap(),
            PodNetwork::default()
        );
    }
}
