//! Behavioural scenarios every provider must pass, written once against [`CloudFixture`]: nodes
//! are initialised, tainted when their machine stops and deleted when it goes; a LoadBalancer
//! Service gets a load balancer over the ready nodes and loses it when deleted; each node's pod
//! CIDR is routed to its machine. They expect a CCM running against the fixture's cloud with
//! short periods (monitor period and instance refresh of about a second), except
//! [`lifecycle_is_prompt_and_cheap`], which holds the CCM to its default flags.

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

/// The CCM's default `--node-monitor-period`.
pub const DEFAULT_MONITOR_PERIOD: Duration = Duration::from_secs(5);

/// How soon, at the default flags, a NotReady node is tainted once its machine stopped or
/// deleted once its machine is gone.
pub const PROMPT: Duration = Duration::from_secs(10);

/// The most cloud requests one monitor period may cost for all NotReady nodes together.
pub const REQUESTS_PER_PERIOD: u64 = 2;

/// Machines stopped and machines terminated by [`lifecycle_is_prompt_and_cheap`] (each more than
/// [`REQUESTS_PER_PERIOD`], so one request per node could not pass).
pub const LIFECYCLE_NODES: usize = 3;

/// How often [`lifecycle_is_prompt_and_cheap`] reads the request count.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// The most the count grew between two samples at most `window` apart.
fn busiest(samples: &[(tokio::time::Instant, u64)], window: Duration) -> u64 {
    let mut most = 0;
    for (i, (t0, c0)) in samples.iter().enumerate() {
        for (t1, c1) in &samples[i + 1..] {
            if t1.duration_since(*t0) > window {
                break;
            }
            most = most.max(c1.saturating_sub(*c0));
        }
    }
    most
}

/// What [`lifecycle_is_prompt_and_cheap`] measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleCost {
    /// Cloud requests over two monitor periods with every node Ready.
    pub idle_requests: u64,
    /// Cloud requests from the moment nodes went NotReady until two periods after the last one
    /// was handled.
    pub not_ready_requests: u64,
    /// Monitor periods that window spans (rounded up).
    pub not_ready_periods: u64,
    /// The most requests seen within any stretch shorter than a monitor period (which holds
    /// at most one lifecycle pass) of that window.
    pub busiest_window: u64,
    /// From NotReady to the last stopped machine's node tainted.
    pub tainted_after: Duration,
    /// From NotReady to the last vanished machine's node deleted.
    pub deleted_after: Duration,
}

/// At the CCM's **default** flags (a monitor period of [`DEFAULT_MONITOR_PERIOD`], the default
/// instance refresh): with every node Ready the cloud is asked nothing; when
/// [`LIFECYCLE_NODES`] machines stop and as many are deleted, their NotReady nodes are tainted
/// and deleted within [`PROMPT`], at no more than [`REQUESTS_PER_PERIOD`] cloud requests per
/// monitor period for all of them together.
pub async fn lifecycle_is_prompt_and_cheap(
    fixture: &dyn CloudFixture,
    admin: &Client,
) -> anyhow::Result<LifecycleCost> {
    let machines = fixture.launch(2 * LIFECYCLE_NODES + 1).await?;
    for m in &machines {
        kube_fixture::create_uninitialized_node(admin, &m.node_name, &[], BTreeMap::new()).await?;
        service_fixture::set_ready(admin, &m.node_name, true).await?;
    }
    for m in &machines {
        wait_for(&format!("{} initialised", m.node_name), STEP, || async {
            Ok(node(admin, &m.node_name)
                .await?
                .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
        })
        .await?;
    }

    // Every node Ready: two monitor periods cost nothing. (A window is the thing measured here:
    // no condition can say "no request will come".)
    let before = fixture.cloud_requests().await?;
    tokio::time::sleep(2 * DEFAULT_MONITOR_PERIOD + Duration::from_secs(1)).await;
    let idle_requests = fixture.cloud_requests().await? - before;

    let (stopped, rest) = machines.split_at(LIFECYCLE_NODES);
    let gone = &rest[..LIFECYCLE_NODES];
    for m in stopped {
        fixture.stop(m).await?;
    }
    for m in gone {
        fixture.terminate(m).await?;
    }
    let before = fixture.cloud_requests().await?;
    let started = tokio::time::Instant::now();
    for m in stopped.iter().chain(gone) {
        service_fixture::set_ready(admin, &m.node_name, false).await?;
    }
    // The count is sampled while the nodes are handled, so that one pass that asked once per
    // node shows in the busiest sub-period window, not only in the average.
    let done = std::sync::atomic::AtomicBool::new(false);
    let sampling = async {
        let mut samples = vec![(started, before)];
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(SAMPLE_EVERY).await;
            samples.push((tokio::time::Instant::now(), fixture.cloud_requests().await?));
        }
        anyhow::Ok(samples)
    };
    let handling = async {
        let result = async {
            let mut tainted_after = Duration::ZERO;
            for m in stopped {
                wait_for(
                    &format!("{} tainted shut down", m.node_name),
                    STEP,
                    || async {
                        Ok(node(admin, &m.node_name)
                            .await?
                            .filter(|n| kube_fixture::has_taint(n, SHUTDOWN)))
                    },
                )
                .await?;
                tainted_after = tainted_after.max(started.elapsed());
            }
            let mut deleted_after = Duration::ZERO;
            for m in gone {
                wait_for(&format!("{} deleted", m.node_name), STEP, || async {
                    Ok(node(admin, &m.node_name).await?.is_none().then_some(()))
                })
                .await?;
                deleted_after = deleted_after.max(started.elapsed());
            }
            // The stopped machines' nodes stay NotReady: two more periods of them.
            tokio::time::sleep(2 * DEFAULT_MONITOR_PERIOD).await;
            anyhow::Ok((tainted_after, deleted_after))
        }
        .await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    };
    let (samples, handled) = tokio::join!(sampling, handling);
    let (samples, (tainted_after, deleted_after)) = (samples?, handled?);
    let not_ready_requests = samples.last().map_or(0, |(_, c)| c - before);
    let busiest_window = busiest(&samples, DEFAULT_MONITOR_PERIOD - Duration::from_secs(1));
    let elapsed = started.elapsed();
    let not_ready_periods = elapsed
        .as_millis()
        .div_ceil(DEFAULT_MONITOR_PERIOD.as_millis()) as u64;
    let cost = LifecycleCost {
        idle_requests,
        not_ready_requests,
        not_ready_periods,
        busiest_window,
        tainted_after,
        deleted_after,
    };
    anyhow::ensure!(
        cost.idle_requests == 0,
        "{} cloud requests while every node was Ready (want 0): {cost:?}",
        cost.idle_requests
    );
    anyhow::ensure!(
        cost.tainted_after <= PROMPT && cost.deleted_after <= PROMPT,
        "NotReady nodes handled later than {PROMPT:?}: {cost:?}"
    );
    anyhow::ensure!(
        cost.busiest_window <= REQUESTS_PER_PERIOD,
        "{} cloud requests within one monitor period with {} NotReady nodes (want at most {REQUESTS_PER_PERIOD}): {cost:?}",
        cost.busiest_window,
        2 * LIFECYCLE_NODES
    );
    anyhow::ensure!(
        cost.not_ready_requests <= cost.not_ready_periods * REQUESTS_PER_PERIOD,
        "{} cloud requests over {} monitor periods with {} NotReady nodes (want at most {REQUESTS_PER_PERIOD} per period): {cost:?}",
        cost.not_ready_requests,
        cost.not_ready_periods,
        2 * LIFECYCLE_NODES
    );
    Ok(cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_window_is_the_most_growth_between_close_samples() {
        let t = tokio::time::Instant::now();
        let at = |ms: u64, count: u64| (t + Duration::from_millis(ms), count);
        // One request per pass at 0.1 s, 5.1 s, 10.1 s… then a pass of 6 at once at 15.1 s.
        let samples = [
            at(0, 0),
            at(250, 1),
            at(5000, 1),
            at(5250, 2),
            at(10250, 3),
            at(15000, 3),
            at(15250, 9),
            at(20250, 10),
        ];
        assert_eq!(busiest(&samples, Duration::from_secs(4)), 6);
        assert_eq!(
            busiest(&samples[..6], Duration::from_secs(4)),
            1,
            "one request per pass"
        );
        assert_eq!(
            busiest(&samples[..6], Duration::from_secs(6)),
            2,
            "a window longer than a period holds two passes"
        );
        assert_eq!(busiest(&[], Duration::from_secs(4)), 0);
    }
}
