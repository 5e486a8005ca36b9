//! One cloud as the behavioural scenarios see it: machines that become nodes, and what the cloud
//! holds for Services and pod routes. Each provider implements it once (AWS over moto, the fake
//! cloud in memory; OpenStack and DVP next), and the same scenarios run on every one.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;
use stratus_cloud::{NextHop, Route};
use stratus_cloud_fake::{running, FakeCloud, InstanceState};

use crate::{ec2_fixture, lb_fixture, route_fixture, service_fixture};

/// A machine of the cloud that can become a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The cloud's ID of the machine (what load balancers and routes point at).
    pub id: String,
    /// The name its kubelet registers the node with.
    pub node_name: String,
    /// The provider ID the cloud-node controller must write.
    pub provider_id: String,
}

/// What the behavioural scenarios need of a cloud.
#[async_trait]
pub trait CloudFixture: Send + Sync {
    /// Starts `count` machines of the cluster.
    async fn launch(&self, count: usize) -> anyhow::Result<Vec<Machine>>;
    /// Shuts a machine down (it still exists).
    async fn stop(&self, machine: &Machine) -> anyhow::Result<()>;
    /// Starts a stopped machine again.
    async fn start(&self, machine: &Machine) -> anyhow::Result<()>;
    /// Deletes a machine for good.
    async fn terminate(&self, machine: &Machine) -> anyhow::Result<()>;
    /// IDs of the machines behind the Service's load balancer; `None` when it has none.
    async fn load_balancer_targets(&self, svc: &Service) -> anyhow::Result<Option<Vec<String>>>;
    /// For each route table of the cluster, the machine the route to `cidr` points at, if any.
    async fn route_targets(&self, cidr: &str) -> anyhow::Result<Vec<Option<String>>>;
    /// Requests the CCM has made to the cloud so far, as the cloud's side counts them (never
    /// the fixture's own set-up calls).
    async fn cloud_requests(&self) -> anyhow::Result<u64>;
}

/// AWS over moto: instances in one subnet, Classic ELBs, the cluster's route tables.
pub struct AwsFixture {
    /// EC2 straight to moto (set-up is not counted as CCM traffic).
    pub ec2: aws_sdk_ec2::Client,
    /// Both load-balancing APIs, straight to moto.
    pub lb: lb_fixture::LbClients,
    /// The subnet instances start in.
    pub subnet: String,
    /// Its zone.
    pub zone: String,
    /// The cluster ID instances are tagged with.
    pub cluster_id: String,
    /// The cluster's route tables.
    pub route_tables: Vec<String>,
    /// The nodes' security group, which instances are put in (load balancers open it).
    pub node_group: String,
    /// The counting proxy the CCM reaches AWS through.
    pub proxy: String,
}

#[async_trait]
impl CloudFixture for AwsFixture {
    async fn launch(&self, count: usize) -> anyhow::Result<Vec<Machine>> {
        let launched = ec2_fixture::launch(
            &self.ec2,
            &self.subnet,
            &self.zone,
            i32::try_from(count)?,
            Some(&self.cluster_id),
            "m5.large",
        )
        .await?;
        for i in &launched {
            ec2_fixture::set_instance_groups(
                &self.ec2,
                &i.id,
                std::slice::from_ref(&self.node_group),
            )
            .await?;
        }
        Ok(launched
            .into_iter()
            .map(|i| Machine {
                node_name: i.private_dns.clone(),
                provider_id: format!("aws:///{}/{}", i.zone, i.id),
                id: i.id,
            })
            .collect())
    }

    async fn stop(&self, machine: &Machine) -> anyhow::Result<()> {
        ec2_fixture::stop(&self.ec2, std::slice::from_ref(&machine.id)).await
    }

    async fn start(&self, machine: &Machine) -> anyhow::Result<()> {
        ec2_fixture::start(&self.ec2, std::slice::from_ref(&machine.id)).await
    }

    async fn terminate(&self, machine: &Machine) -> anyhow::Result<()> {
        ec2_fixture::terminate(&self.ec2, std::slice::from_ref(&machine.id)).await
    }

    async fn load_balancer_targets(&self, svc: &Service) -> anyhow::Result<Option<Vec<String>>> {
        let name = service_fixture::load_balancer_name(svc);
        Ok(self.lb.classic(&name).await?.map(|lb| {
            lb.instances()
                .iter()
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect()
        }))
    }

    async fn route_targets(&self, cidr: &str) -> anyhow::Result<Vec<Option<String>>> {
        let mut out = Vec::new();
        for table in &self.route_tables {
            out.push(route_fixture::routes(&self.ec2, table).await?.remove(cidr));
        }
        Ok(out)
    }

    async fn cloud_requests(&self) -> anyhow::Result<u64> {
        proxy_total(&self.proxy).await
    }
}

/// Every request the counting proxy at `endpoint` has seen.
pub async fn proxy_total(endpoint: &str) -> anyhow::Result<u64> {
    let counts = stratus_testenv::aws::ProxyControl { endpoint }
        .counts()
        .await?;
    Ok(counts.values().sum())
}

/// The fake cloud, in memory: the CCM must run in the same process.
pub struct FakeFixture {
    /// The cloud the CCM's fake provider hands out.
    pub cloud: Arc<FakeCloud>,
    /// Machines launched so far (for IDs and addresses).
    next: std::sync::atomic::AtomicUsize,
}

impl FakeFixture {
    /// A fixture over `cloud`.
    pub fn new(cloud: Arc<FakeCloud>) -> FakeFixture {
        FakeFixture {
            cloud,
            next: std::sync::atomic::AtomicUsize::new(1),
        }
    }
}

#[async_trait]
impl CloudFixture for FakeFixture {
    async fn launch(&self, count: usize) -> anyhow::Result<Vec<Machine>> {
        let first = self
            .next
            .fetch_add(count, std::sync::atomic::Ordering::SeqCst);
        Ok((first..first + count)
            .map(|n| {
                let instance = running(
                    &format!("fm-{n}"),
                    &format!("fake-node-{n}"),
                    &format!("10.9.{}.{}", n / 250, n % 250 + 1),
                );
                self.cloud.add_instance(instance.clone());
                Machine {
                    id: instance.id.clone(),
                    node_name: instance.node_name.clone(),
                    provider_id: instance.provider_id().to_string(),
                }
            })
            .collect())
    }

    async fn stop(&self, machine: &Machine) -> anyhow::Result<()> {
        self.cloud.set_state(&machine.id, InstanceState::Stopped);
        Ok(())
    }

    async fn start(&self, machine: &Machine) -> anyhow::Result<()> {
        self.cloud.set_state(&machine.id, InstanceState::Running);
        Ok(())
    }

    async fn terminate(&self, machine: &Machine) -> anyhow::Result<()> {
        self.cloud.set_state(&machine.id, InstanceState::Gone);
        Ok(())
    }

    async fn load_balancer_targets(&self, svc: &Service) -> anyhow::Result<Option<Vec<String>>> {
        let ns = svc.metadata.namespace.as_deref().unwrap_or("default");
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        Ok(self.cloud.load_balancer_of(ns, name).map(|lb| {
            lb.request
                .nodes
                .iter()
                .filter_map(|n| n.provider_id.rsplit('/').next().map(str::to_string))
                .collect()
        }))
    }

    async fn route_targets(&self, cidr: &str) -> anyhow::Result<Vec<Option<String>>> {
        let target = |routes: Vec<Route>| {
            routes
                .into_iter()
                .find(|r| r.destination.to_string() == cidr)
                .and_then(|r| match r.next_hop {
                    NextHop::Target(t) => Some(t.0),
                    _ => None,
                })
        };
        Ok(vec![target(self.cloud.routes_of("rt-main"))])
    }

    /// The fake answers instance questions from memory, as a provider answers them from its
    /// view (the node controller asks for metadata at every Node change, and real providers
    /// answer that from their caches); what stands for a cloud request is a batched refresh.
    async fn cloud_requests(&self) -> anyhow::Result<u64> {
        Ok(self.cloud.count("refresh_instances") as u64)
    }
}
