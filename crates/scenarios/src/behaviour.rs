//! Behavioural scenarios every provider must pass, written once against [`CloudFixture`]: nodes
//! are initialised, tainted when their machine stops and deleted when it goes; a LoadBalancer
//! Service gets a load balancer over the ready nodes and loses it when deleted; each node's pod
//! CIDR is routed to its machine. They expect a CCM running against the fixture's cloud with
//! short periods (monitor period and instance refresh of about a second).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;

use crate::cloud_fixture::{CloudFixture, Machine};
use crate::{kube_fixture, service_fixture, wait_for};

/// How long one step may take.
pub const STEP: Duration = Duration::from_secs(60);

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

async fn node(admin: &Client, name: &str) -> anyhow::Result<Option<Node>> {
    kube_fixture::get_node(admin, name).await
}

/// Two machines join as uninitialised nodes and are initialised with their provider IDs; one is
/// stopped (its NotReady node is tainted, then untainted when it starts), the other terminated
/// (its NotReady node is deleted).
pub async fn nodes_join_stop_and_leave(
    fixture: &dyn CloudFixture,
    admin: &Client,
) -> anyhow::Result<()> {
    let machines = fixture.launch(2).await?;
    for m in &machines {
        kube_fixture::create_uninitialized_node(admin, &m.node_name, &[], BTreeMap::new()).await?;
    }
    for m in &machines {
        let n = wait_for(&format!("{} initialised", m.node_name), STEP, || async {
            Ok(node(admin, &m.node_name)
                .await?
                .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
        })
        .await?;
        let pid = n.spec.and_then(|s| s.provider_id).unwrap_or_default();
        anyhow::ensure!(
            pid == m.provider_id,
            "{}: providerID {pid}, want {}",
            m.node_name,
            m.provider_id
        );
    }
    let (stopped, gone): (&Machine, &Machine) = (&machines[0], &machines[1]);
    service_fixture::set_ready(admin, &stopped.node_name, false).await?;
    service_fixture::set_ready(admin, &gone.node_name, false).await?;
    fixture.stop(stopped).await?;
    fixture.terminate(gone).await?;
    wait_for(
        &format!("{} tainted shut down", stopped.node_name),
        STEP,
        || async {
            Ok(node(admin, &stopped.node_name)
                .await?
                .filter(|n| kube_fixture::has_taint(n, SHUTDOWN)))
        },
    )
    .await?;
    wait_for(&format!("{} deleted", gone.node_name), STEP, || async {
        Ok(node(admin, &gone.node_name).await?.is_none().then_some(()))
    })
    .await?;
    fixture.start(stopped).await?;
    wait_for(
        &format!("{} untainted", stopped.node_name),
        STEP,
        || async {
            Ok(node(admin, &stopped.node_name)
                .await?
                .filter(|n| !kube_fixture::has_taint(n, SHUTDOWN)))
        },
    )
    .await?;
    Ok(())
}

/// A LoadBalancer Service gets an ingress and a load balancer over the ready node; deleting the
/// Service deletes the load balancer.
pub async fn load_balancer_follows_its_service(
    fixture: &dyn CloudFixture,
    admin: &Client,
    namespace: &str,
) -> anyhow::Result<()> {
    let machine = fixture.launch(1).await?.remove(0);
    service_fixture::create_ready_node(
        admin,
        &machine.node_name,
        &machine.provider_id,
        BTreeMap::new(),
    )
    .await?;
    let svc = service_fixture::create_lb_service(
        admin,
        namespace,
        "behaviour-web",
        &[80],
        BTreeMap::new(),
    )
    .await?;
    wait_for("behaviour-web ingress", STEP, || async {
        Ok(
            service_fixture::get_service(admin, namespace, "behaviour-web")
                .await?
                .filter(|s| {
                    s.status
                        .as_ref()
                        .and_then(|st| st.load_balancer.as_ref())
                        .and_then(|lb| lb.ingress.as_ref())
                        .is_some_and(|i| !i.is_empty())
                }),
        )
    })
    .await?;
    wait_for("the ready node behind the load balancer", STEP, || async {
        Ok(fixture
            .load_balancer_targets(&svc)
            .await?
            .filter(|t| t.contains(&machine.id)))
    })
    .await?;
    service_fixture::delete_service(admin, namespace, "behaviour-web").await?;
    wait_for("the load balancer deleted", STEP, || async {
        Ok(fixture
            .load_balancer_targets(&svc)
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    Ok(())
}

/// A node with a pod CIDR gets a route to its machine in every route table of the cluster.
pub async fn pod_cidr_is_routed_to_its_machine(
    fixture: &dyn CloudFixture,
    admin: &Client,
    pod_cidr: &str,
) -> anyhow::Result<()> {
    let machine = fixture.launch(1).await?.remove(0);
    kube_fixture::create_initialized_node(
        admin,
        &machine.node_name,
        &machine.provider_id,
        &[pod_cidr],
    )
    .await?;
    wait_for(
        &format!("route {pod_cidr} to {}", machine.id),
        STEP,
        || async {
            let targets = fixture.route_targets(pod_cidr).await?;
            Ok((!targets.is_empty()
                && targets
                    .iter()
                    .all(|t| t.as_deref() == Some(machine.id.as_str())))
            .then_some(()))
        },
    )
    .await?;
    Ok(())
}
