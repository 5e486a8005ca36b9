//! Plain-text tables of nodes and load balancers for people (the demo's output).

use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
use k8s_openapi::api::core::v1::Node;

use crate::kube_fixture::{addresses, label};

/// One line per node: name, providerID, zone, instance type, addresses.
pub fn node_table(nodes: &[Node]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "PROVIDER-ID".to_string(),
        "ZONE".to_string(),
        "TYPE".to_string(),
        "ADDRESSES".to_string(),
    ]];
    for n in nodes {
        let addrs: Vec<String> = addresses(n)
            .into_iter()
            .map(|(t, a)| format!("{t}={a}"))
            .collect();
        rows.push([
            n.metadata.name.clone().unwrap_or_default(),
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_else(|| "<none>".into()),
            label(n, "topology.kubernetes.io/zone")
                .unwrap_or("-")
                .to_string(),
            label(n, "node.kubernetes.io/instance-type")
                .unwrap_or("-")
                .to_string(),
            addrs.join(","),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for c in 0..4 {
                line.push_str(&format!("{:<w$}  ", r[c], w = widths[c]));
            }
            line.push_str(&r[4]);
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line per Classic ELB: name, scheme, listeners (`TCP:80->30080`), registered instances,
/// security groups.
pub fn classic_table(lbs: &[LoadBalancerDescription]) -> String {
    let mut rows = vec![vec![
        "NAME".to_string(),
        "SCHEME".to_string(),
        "LISTENERS".to_string(),
        "INSTANCES".to_string(),
        "SECURITY-GROUPS".to_string(),
    ]];
    for d in lbs {
        let listeners: Vec<String> = d
            .listener_descriptions()
            .iter()
            .filter_map(|l| l.listener())
            .map(|l| {
                format!(
                    "{}:{}->{}",
                    l.protocol().to_ascii_uppercase(),
                    l.load_balancer_port(),
                    l.instance_port()
                )
            })
            .collect();
        let mut instances: Vec<&str> = d
            .instances()
            .iter()
            .filter_map(|i| i.instance_id())
            .collect();
        instances.sort_unstable();
        rows.push(vec![
            d.load_balancer_name().unwrap_or("-").to_string(),
            d.scheme().unwrap_or("-").to_string(),
            listeners.join(","),
            instances.join(","),
            d.security_groups().join(","),
        ]);
    }
    columns(&rows)
}
