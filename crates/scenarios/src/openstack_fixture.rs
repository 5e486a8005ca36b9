//! OpenStack as the behavioural scenarios see it: servers made in the simulators' memory
//! (straight through the test-control handle, so set-up is not counted as CCM traffic), nodes
//! named after their servers, and the provider IDs OCCM writes. Load balancers and routes are
//! not part of the OpenStack provider yet: asking for them is an error naming that.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;
use stratus_openstack_sim::{ServerSpec, ServerStatus, SimHandle};

use crate::cloud_fixture::{CloudFixture, Machine};

/// The provider ID OCCM writes for a server (no region: `OS_CCM_REGIONAL` unset).
pub fn provider_id(server_id: &str) -> String {
    format!("openstack:///{server_id}")
}

/// `cloud_conf` with the `[LoadBalancer]` section the CCM's load balancers need in the
/// simulators: members on the tenant network's subnet (`stratus-internal`), floating IPs from
/// the `public` network.
pub fn with_load_balancer_section(sim: &SimHandle, cloud_conf: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    let network = sim
        .network_id("stratus-internal")
        .context("the tenant network")?;
    let subnet = sim
        .ports()
        .iter()
        .find(|p| p["network_id"] == network.as_str())
        .and_then(|p| p["fixed_ips"][0]["subnet_id"].as_str().map(str::to_owned))
        .context("a port on the tenant subnet")?;
    let public = sim.network_id("public").context("the public network")?;
    Ok(format!(
        "{cloud_conf}\n[LoadBalancer]\nsubnet-id = {subnet}\nfloating-network-id = {public}\n"
    ))
}

/// Servers of the simulated project, named `<prefix>-<n>`.
pub struct OpenStackFixture {
    /// The simulators' test-control handle.
    pub sim: SimHandle,
    /// Server names start with it (several fixtures may share one cloud).
    pub prefix: String,
    /// The flavor servers boot with.
    pub flavor: String,
    /// The counting proxy the CCM reaches this cloud through, when the test counts requests
    /// (its own cloud: a shared one counts every test's CCM).
    pub proxy: Option<String>,
    next: AtomicUsize,
}

impl OpenStackFixture {
    /// A fixture making `m1.small` servers named `<prefix>-<n>` through `sim`.
    pub fn new(sim: SimHandle, prefix: &str) -> OpenStackFixture {
        OpenStackFixture {
            sim,
            prefix: prefix.to_owned(),
            flavor: "m1.small".to_owned(),
            proxy: None,
            next: AtomicUsize::new(1),
        }
    }

    /// The same fixture, counting the CCM's requests at the proxy at `endpoint`.
    pub fn counting_at(mut self, endpoint: &str) -> OpenStackFixture {
        self.proxy = Some(endpoint.to_owned());
        self
    }

    fn set_status(&self, machine: &Machine, status: ServerStatus) -> anyhow::Result<()> {
        Ok(self.sim.set_server_status(&machine.id, status)?)
    }
}

#[async_trait]
impl CloudFixture for OpenStackFixture {
    async fn launch(&self, count: usize) -> anyhow::Result<Vec<Machine>> {
        let first = self.next.fetch_add(count, Ordering::SeqCst);
        let specs: Vec<ServerSpec> = (first..first + count)
            .map(|n| ServerSpec {
                flavor: self.flavor.clone(),
                ..ServerSpec::active(format!("{}-{n}", self.prefix))
            })
            .collect();
        let ids = self.sim.create_servers(&specs)?;
        Ok(specs
            .into_iter()
            .zip(ids)
            .map(|(spec, id)| Machine {
                provider_id: provider_id(&id),
                node_name: spec.name,
                id,
            })
            .collect())
    }

    async fn stop(&self, machine: &Machine) -> anyhow::Result<()> {
        self.set_status(machine, ServerStatus::Shutoff)
    }

    async fn start(&self, machine: &Machine) -> anyhow::Result<()> {
        self.set_status(machine, ServerStatus::Active)
    }

    async fn terminate(&self, machine: &Machine) -> anyhow::Result<()> {
        Ok(self.sim.delete_server(&machine.id)?)
    }

    async fn load_balancer_targets(&self, _svc: &Service) -> anyhow::Result<Option<Vec<String>>> {
        anyhow::bail!("Octavia load balancers are not part of the OpenStack provider yet")
    }

    async fn route_targets(&self, _cidr: &str) -> anyhow::Result<Vec<Option<String>>> {
        anyhow::bail!("routes on the Neutron router are not part of the OpenStack provider yet")
    }

    async fn cloud_requests(&self) -> anyhow::Result<u64> {
        let Some(proxy) = &self.proxy else {
            anyhow::bail!("this OpenStack fixture does not count requests (see counting_at)");
        };
        crate::cloud_fixture::proxy_total(proxy).await
    }
}
