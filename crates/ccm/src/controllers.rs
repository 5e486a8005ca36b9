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

/// The controllers `--controllers` names, with whether `*` enables them.
pub const KNOWN_CONTROLLERS: &[(&str, bool)] = &[
    (CLOUD_NODE, true),
    (CLOUD_NODE_LIFECYCLE, true),
    (SERVICE, true),
    (ROUTE, true),
];

/// Resolves `--controllers` into the enabled set.
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
        let known = KNOWN_CONTROLLERS
            .iter()
            .find(|(k, _)| *k == name)
            .ok_or_else(|| {
                let names: Vec<&str> = KNOWN_CONTROLLERS.iter().map(|(k, _)| *k).collect();
                format!(
                    "--controllers: unknown controller {name:?} (known: {})",
                    names.join(", ")
                )
            })?;
        if disable {
            off.push(known.0)
        } else {
            on.push(known.0)
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
