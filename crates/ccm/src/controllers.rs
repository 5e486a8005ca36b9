//! The controllers of the cloud-controller-manager and `--controllers` (upstream semantics).

/// The cloud-node controller.
pub const CLOUD_NODE: &str = "cloud-node";
/// The cloud-node-lifecycle controller.
pub const CLOUD_NODE_LIFECYCLE: &str = "cloud-node-lifecycle";
/// The service (load balancer) controller.
pub const SERVICE: &str = "service";
/// The route controller.
pub const ROUTE: &str = "route";
/// The pod-CIDR allocator; on with `--allocate-node-cidrs`, whatever `--controllers` says (as
/// kube-controller-manager's, it is independent of the route controller).
pub const NODE_IPAM: &str = "node-ipam";

/// cloud-provider-aws's tagging controller: tags the cloud resources behind nodes (`--tags`,
/// `--resources`); off unless named, as upstream (not in `*`).
pub const TAGGING: &str = "tagging";

/// The controllers `--controllers` names, with whether `*` enables them.
pub const KNOWN_CONTROLLERS: &[(&str, bool)] = &[
    (CLOUD_NODE, true),
    (CLOUD_NODE_LIFECYCLE, true),
    (SERVICE, true),
    (ROUTE, true),
    (TAGGING, false),
];

/// Stratus's controller name for a name upstream accepts: the short names (upstream's aliases,
/// which Deckhouse passes), upstream's canonical `*-controller` names, and kube-controller-manager's
/// older spellings (used in leader-migration configurations).
pub fn canonical(name: &str) -> Option<&'static str> {
    Some(match name {
        "cloud-node" | "cloud-node-controller" => CLOUD_NODE,
        "cloud-node-lifecycle"
        | "cloud-node-lifecycle-controller"
        | "cloud-nodelifecycle-controller" => CLOUD_NODE_LIFECYCLE,
        "service" | "service-controller" | "service-lb-controller" => SERVICE,
        "route" | "route-controller" | "node-route-controller" => ROUTE,
        "node-ipam" | "nodeipam" | "node-ipam-controller" => NODE_IPAM,
        "tagging" | "tagging-controller" => TAGGING,
        _ => return None,
    })
}

/// Resolves `--controllers` into the enabled set. Names are upstream's (`cloud-node-controller`,
/// `service-lb-controller`, …) or their short aliases (`cloud-node`, `service`, …); `nodeipam`
/// is accepted and runs the pod-CIDR allocator, which needs `--allocate-node-cidrs` and
/// `--cluster-cidr` (it runs with them whatever `--controllers` says).
pub fn enabled_controllers(spec: &[String]) -> Result<Vec<&'static str>, String> {
    let mut star = false;
    let mut on: Vec<&str> = Vec::new();
    let mut off: Vec<&str> = Vec::new();
    for item in spec.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item == "*" {
            star = true;
            continue;
        }
        let (name, disable) = match item.strip_prefix('-') {
            Some(n) => (n, true),
            None => (item, false),
        };
        let known = canonical(name).ok_or_else(|| {
            format!(
                "--controllers: unknown controller {name:?} (known: cloud-node-controller, \
                 cloud-node-lifecycle-controller, service-lb-controller, node-route-controller, \
                 nodeipam, tagging, or the short names cloud-node, cloud-node-lifecycle, service, route)"
            )
        })?;
        if known == NODE_IPAM {
            // The allocator follows --allocate-node-cidrs (see [`NODE_IPAM`]).
            continue;
        }
        if disable {
            off.push(known)
        } else {
            on.push(known)
        }
    }
    Ok(KNOWN_CONTROLLERS
        .iter()
        .filter(|(name, default_on)| {
            !off.contains(name) && (on.contains(name) || (star && *default_on))
        })
        .map(|(name, _)| *name)
        .collect())
}
