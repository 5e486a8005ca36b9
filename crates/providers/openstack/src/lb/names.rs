//! OCCM's names and descriptions, so a cluster can switch from OCCM and adopt its load
//! balancers: `kube_service_<cluster>_<ns>_<name>`, `listener_<i>_…`, `pool_<i>_…`,
//! `monitor_<i>_…`, and the floating IP description that marks an address as ours.

use stratus_cloud::ServiceRef;

/// Longest Octavia and Neutron name.
pub const MAX_NAME: usize = 255;

fn cut(s: String) -> String {
    match s.char_indices().nth(MAX_NAME) {
        Some((at, _)) => s[..at].to_owned(),
        None => s,
    }
}

/// The prefix of every load balancer of the cluster.
pub fn cluster_prefix(cluster: &str) -> String {
    format!("kube_service_{cluster}_")
}

/// The load balancer's name (OCCM's `GetLoadBalancerName`).
pub fn lb_name(cluster: &str, service: &ServiceRef) -> String {
    cut(format!(
        "{}{}_{}",
        cluster_prefix(cluster),
        service.namespace,
        service.name
    ))
}

/// The Service a load balancer of `cluster` belongs to, from its name (`namespace`, `name`):
/// neither may hold `_`, so the first one after the prefix splits them.
pub fn service_of(cluster: &str, lb_name: &str) -> Option<(String, String)> {
    let rest = lb_name.strip_prefix(&cluster_prefix(cluster))?;
    let (ns, name) = rest.split_once('_')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('_'))
        .then(|| (ns.to_owned(), name.to_owned()))
}

/// The `i`th listener's name.
pub fn listener_name(i: usize, lb: &str) -> String {
    cut(format!("listener_{i}_{lb}"))
}

/// The `i`th pool's name.
pub fn pool_name(i: usize, lb: &str) -> String {
    cut(format!("pool_{i}_{lb}"))
}

/// The `i`th health monitor's name.
pub fn monitor_name(i: usize, lb: &str) -> String {
    cut(format!("monitor_{i}_{lb}"))
}

/// The load balancer's description.
pub fn lb_description(cluster: &str, service: &ServiceRef) -> String {
    cut(format!(
        "Kubernetes external service {}/{} from cluster {cluster}",
        service.namespace, service.name
    ))
}

/// The description of a floating IP we create (OCCM's; only these are ever released).
pub fn fip_description(cluster: &str, service: &ServiceRef) -> String {
    cut(format!(
        "Floating IP for Kubernetes external service {}/{} from cluster {cluster}",
        service.namespace, service.name
    ))
}

/// The Service a floating IP of `cluster` was created for, from its description.
pub fn fip_owner(cluster: &str, description: &str) -> Option<(String, String)> {
    let rest = description.strip_prefix("Floating IP for Kubernetes external service ")?;
    let (service, c) = rest.split_once(" from cluster ")?;
    if c != cluster {
        return None;
    }
    let (ns, name) = service.split_once('/')?;
    Some((ns.to_owned(), name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str) -> ServiceRef {
        ServiceRef {
            namespace: ns.into(),
            name: name.into(),
            uid: "u".into(),
        }
    }

    #[test]
    fn names_match_occm_and_parse_back() {
        let s = svc("default", "web");
        let name = lb_name("kubernetes", &s);
        assert_eq!(name, "kube_service_kubernetes_default_web");
        assert_eq!(
            service_of("kubernetes", &name),
            Some(("default".into(), "web".into()))
        );
        assert_eq!(service_of("other", &name), None);
        assert_eq!(
            service_of("my_cluster", "kube_service_my_cluster_ns_web"),
            Some(("ns".into(), "web".into()))
        );
        assert_eq!(
            listener_name(0, &name),
            "listener_0_kube_service_kubernetes_default_web"
        );
        assert_eq!(pool_name(1, "x"), "pool_1_x");
        assert_eq!(monitor_name(2, "x"), "monitor_2_x");
        let long = svc(&"n".repeat(200), &"m".repeat(200));
        assert_eq!(lb_name("c", &long).chars().count(), MAX_NAME);
        let d = fip_description("c1", &s);
        assert_eq!(
            d,
            "Floating IP for Kubernetes external service default/web from cluster c1"
        );
        assert_eq!(fip_owner("c1", &d), Some(("default".into(), "web".into())));
        assert_eq!(fip_owner("c2", &d), None);
        assert_eq!(fip_owner("c1", "my own address"), None);
    }
}
