//! The OpenStack side of the end-to-end suite: the simulators (behind a real Keystone, inside the
//! test's network namespace) holding the node's server — a network and subnet around the node
//! IP and a server named as the node whose port has the node IP — and the cloud config and chart
//! values that run the cloud-controller-manager chart for OpenStack as Deckhouse's module does.

use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use stratus_openstack_sim::model::seed;
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_testenv::node::control_plane::CLUSTER_CIDR;
use stratus_testenv::node::netns::NODE_IP;
use stratus_testenv::node::NODE_NAME;
use stratus_testenv::{OpenStackCredentials, OpenStackEnv};

/// The cluster name the CCM is started with (`--cluster-name`; load balancer names carry it).
pub const CLUSTER_NAME: &str = "e2e";
/// The Neutron network the node's server is on.
pub const NODE_NETWORK: &str = "stratus-e2e-nodes";
/// The node server's flavor (the Node's instance type).
pub const FLAVOR: &str = "m1.small";
/// The node server's availability zone (the Node's zone).
pub const ZONE: &str = seed::ZONE;
/// The CCM's HTTPS port in Deckhouse's module (`--secure-port=10471`).
pub const SECURE_PORT: u16 = 10471;
/// The name the chart gives the DaemonSet and its pods (Deckhouse's container name).
pub const CCM_NAME: &str = "openstack-cloud-controller-manager";

/// The node's server and where it is.
#[derive(Debug, Clone)]
pub struct NodeServer {
    /// The Nova server's ID (the Node's provider ID is `openstack:///<id>`).
    pub id: String,
    /// The subnet holding the node IP (load balancer VIPs and members go there).
    pub subnet: String,
    /// The router of the seeded topology (pod routes go there).
    pub router: String,
}

/// The node IP's /24, the subnet of the node's network.
pub fn node_cidr() -> String {
    let [a, b, c, _] = NODE_IP.octets();
    format!("{}/24", Ipv4Addr::new(a, b, c, 0))
}

/// Makes the node's network and an ACTIVE server named [`NODE_NAME`] on it whose fixed IP is
/// the node IP, so the CCM finds the kubelet's Node by name and address.
pub fn node_server(sim: &SimHandle) -> Result<NodeServer> {
    let (_, subnet) = sim
        .create_network(NODE_NETWORK, &node_cidr(), false)
        .context("creating the node's network")?;
    let spec = ServerSpec {
        network: Some(NODE_NETWORK.to_owned()),
        fixed_ip: Some(NODE_IP.to_string()),
        flavor: FLAVOR.to_owned(),
        zone: Some(ZONE.to_owned()),
        ..ServerSpec::active(NODE_NAME)
    };
    let id = sim
        .create_servers(&[spec])
        .context("creating the node's server")?
        .into_iter()
        .next()
        .context("no server made")?;
    let router = sim
        .router_id(seed::ROUTER)
        .with_context(|| format!("the seeded router {}", seed::ROUTER))?;
    Ok(NodeServer { id, subnet, router })
}

/// The CCM's `cloud.conf`: the user's credentials against Keystone (through the counting
/// proxy), load balancers on the node's subnet with floating IPs from `public`, pod routes on
/// the seeded router — the sections Deckhouse's module renders into its `cloud-config`.
pub fn cloud_conf(cloud: &OpenStackEnv, sim: &SimHandle, node: &NodeServer) -> Result<String> {
    let public = sim
        .network_id(seed::PUBLIC_NETWORK)
        .with_context(|| format!("the external network {}", seed::PUBLIC_NETWORK))?;
    Ok(format!(
        "{}\n[LoadBalancer]\nsubnet-id = {}\nfloating-network-id = {public}\n\n[Route]\nrouter-id = {}\n",
        cloud.cloud_conf(),
        node.subnet,
        node.router
    ))
}

/// The `cloud.conf` of a pod on the pod network: the same user, Keystone reached at `relay`
/// (`http://NODE_IP:PORT`, a relay to the proxy) and the catalog's `internal` endpoints, which
/// the test moves to that relay (`OpenStackEnv::move_interface`).
pub fn pod_cloud_conf(credentials: &OpenStackCredentials, relay: &str) -> String {
    let through_relay = OpenStackCredentials {
        auth_url: format!("{relay}/identity/v3"),
        ..credentials.clone()
    };
    format!(
        "{}os-endpoint-type = internalURL\n",
        through_relay.cloud_conf()
    )
}

/// Values of `charts/cloud-controller-manager` for OpenStack with Deckhouse's arguments
/// (`--cloud-provider=openstack`, pod CIDRs allocated and routed by the CCM, the HTTPS port
/// bound to the host IP on 10471), the image imported into the node, and `cloud_conf` as the
/// chart's cloud config Secret.
pub fn ccm_values(cloud_conf: &str) -> Value {
    json!({
        "nameOverride": CCM_NAME,
        "image": {"pullPolicy": "Never"},
        "args": [
            "--v=2",
            "--cloud-provider=openstack",
            format!("--cluster-name={CLUSTER_NAME}"),
            "--leader-elect=true",
            format!("--cluster-cidr={CLUSTER_CIDR}"),
            "--allocate-node-cidrs=true",
            "--configure-cloud-routes=true",
            "--bind-address=$(HOST_IP)",
        ],
        "env": [
            {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        ],
        "securePort": SECURE_PORT,
        "cloudConfig": {"contents": cloud_conf},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_network_holds_the_node_ip() {
        assert_eq!(node_cidr(), "10.30.1.0/24");
    }

    #[test]
    fn a_pod_reaches_keystone_and_the_internal_endpoints_through_the_relay() {
        let credentials = OpenStackCredentials {
            auth_url: "http://127.0.0.1:1/identity/v3".into(),
            username: "u".into(),
            password: "p".into(),
            project_name: "pr".into(),
            project_id: "id".into(),
            user_domain_name: "d".into(),
            project_domain_name: "d".into(),
            region: "RegionOne".into(),
            interface: "public".into(),
        };
        let conf = pod_cloud_conf(&credentials, "http://10.30.1.2:7");
        assert!(conf.starts_with("[Global]\n"), "{conf}");
        assert!(
            conf.contains("auth-url = http://10.30.1.2:7/identity/v3\n"),
            "{conf}"
        );
        assert!(!conf.contains("127.0.0.1"), "{conf}");
        assert!(
            conf.ends_with("region = RegionOne\nos-endpoint-type = internalURL\n"),
            "{conf}"
        );
    }

    #[test]
    fn values_follow_deckhouse_and_leave_the_cloud_config_to_the_chart() {
        let values = ccm_values("[Global]\n");
        let args: Vec<&str> = values["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--cloud-provider=openstack"));
        assert!(args.contains(&"--bind-address=$(HOST_IP)"));
        assert!(
            !args.iter().any(|a| a.starts_with("--cloud-config")),
            "the chart adds --cloud-config itself: {args:?}"
        );
        assert_eq!(values["securePort"], SECURE_PORT);
        assert_eq!(values["env"][0]["name"], "HOST_IP");
    }
}
