//! Fake route tables: every table holds every route; targets are instance IDs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stratus_cloud::{Cidr, CloudError, NextHop, NodeInfo, Route, RouteTable, RouteTarget, Routes};

use crate::knobs::Controls;

/// The routes capability of the fake.
#[derive(Debug)]
pub struct FakeRoutes {
    pub(crate) tables: Mutex<BTreeMap<String, Vec<Route>>>,
    pub(crate) controls: Arc<Controls>,
}

impl FakeRoutes {
    fn write(
        &self,
        table: &str,
        destination: &Cidr,
        hop: Option<NextHop>,
    ) -> Result<(), CloudError> {
        let mut tables = self.tables.lock().expect("tables");
        let routes = tables
            .get_mut(table)
            .ok_or_else(|| CloudError::InvalidInput(format!("no route table {table}")))?;
        routes.retain(|r| r.destination != *destination);
        if let Some(next_hop) = hop {
            routes.push(Route {
                destination: *destination,
                next_hop,
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Routes for FakeRoutes {
    fn route_target(&self, node: &NodeInfo) -> Result<RouteTarget, CloudError> {
        node.provider_id
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .filter(|id| !id.is_empty())
            .map(|id| RouteTarget(id.to_string()))
            .ok_or_else(|| {
                CloudError::InvalidInput(format!("node {} has no provider ID", node.name))
            })
    }

    async fn route_tables(&self) -> Result<Vec<RouteTable>, CloudError> {
        self.controls.enter("routes", "route_tables", "").await?;
        Ok(self
            .tables
            .lock()
            .expect("tables")
            .iter()
            .map(|(id, routes)| RouteTable {
                id: id.clone(),
                routes: routes.clone(),
            })
            .collect())
    }

    async fn prepare_target(&self, target: &RouteTarget) -> Result<(), CloudError> {
        self.controls
            .enter("routes", "prepare_target", &target.0)
            .await
    }

    async fn create_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.controls
            .enter("routes", "create_route", format!("{table} {destination}"))
            .await?;
        self.write(table, destination, Some(NextHop::Target(target.clone())))
    }

    async fn replace_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.controls
            .enter("routes", "replace_route", format!("{table} {destination}"))
            .await?;
        self.write(table, destination, Some(NextHop::Target(target.clone())))
    }

    async fn delete_route(&self, table: &str, destination: &Cidr) -> Result<(), CloudError> {
        self.controls
            .enter("routes", "delete_route", format!("{table} {destination}"))
            .await?;
        self.write(table, destination, None)
    }
}
