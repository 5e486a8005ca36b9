//! Plain-text tables of nodes for people (the demo's output).

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
