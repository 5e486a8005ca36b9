//! Routes for AWS: pod-CIDR routes to EC2 instances in the cluster's route tables.
//!
//! Unlike upstream, which insists on exactly one table, every table in [`TableScope`] gets every
//! route; tables are always listed with server-side filters, never the whole account. The
//! source/destination check of an instance is disabled once, before its first route is written,
//! and remembered for the life of the process.

mod convert;
mod scope;

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use stratus_cloud::{Cidr, CloudError, NodeInfo, RouteTable, RouteTarget, Routes};

pub use scope::TableScope;

use stratus_aws_api::ec2::Ec2;
use stratus_aws_api::provider_id::{instance_id_from_node_name, AwsProviderId};

/// The AWS route capability.
pub struct AwsRoutes {
    ec2: Ec2,
    scope: TableScope,
    /// Instances whose source/destination check this process has disabled.
    prepared: Mutex<HashSet<String>>,
}

impl AwsRoutes {
    /// Routes in the tables of `scope`.
    pub fn new(ec2: Ec2, scope: TableScope) -> Self {
        Self {
            ec2,
            scope,
            prepared: Mutex::new(HashSet::new()),
        }
    }
}

#[async_trait]
impl Routes for AwsRoutes {
    fn route_target(&self, node: &NodeInfo) -> Result<RouteTarget, CloudError> {
        let instance = match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
            Some(pid) => {
                AwsProviderId::parse(pid)
                    .map_err(|e| CloudError::InvalidInput(e.to_string()))?
                    .instance
            }
            None => instance_id_from_node_name(&node.name).ok_or_else(|| {
                CloudError::InvalidInput(format!("node {} has no provider ID yet", node.name))
            })?,
        };
        Ok(RouteTarget(instance.to_string()))
    }

    async fn route_tables(&self) -> Result<Vec<RouteTable>, CloudError> {
        let mut tables = BTreeMap::new();
        for filters in self.scope.listings() {
            for t in self.ec2.describe_route_tables(&filters).await? {
                if let Some(table) = convert::route_table(&t) {
                    tables.entry(table.id.clone()).or_insert(table);
                }
            }
        }
        if tables.is_empty() {
            return Err(CloudError::InvalidInput(self.scope.describe()));
        }
        Ok(tables.into_values().collect())
    }

    async fn prepare_target(&self, target: &RouteTarget) -> Result<(), CloudError> {
        if self
            .prepared
            .lock()
            .expect("prepared lock")
            .contains(&target.0)
        {
            return Ok(());
        }
        self.ec2.disable_source_dest_check(&target.0).await?;
        tracing::info!(instance = %target, "source/destination check disabled");
        self.prepared
            .lock()
            .expect("prepared lock")
            .insert(target.0.clone());
        Ok(())
    }

    async fn create_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.ec2.create_route(table, destination, &target.0).await
    }

    async fn replace_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.ec2.replace_route(table, destination, &target.0).await
    }

    async fn delete_route(&self, table: &str, destination: &Cidr) -> Result<(), CloudError> {
        self.ec2.delete_route(table, destination).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> AwsRoutes {
        let conf = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .build();
        let metrics = std::sync::Arc::new(stratus_cloud_kit::ApiMetrics::register(
            &mut prometheus_client::registry::Registry::default(),
        ));
        let api = stratus_aws_api::call::AwsApi::new("ec2", metrics, Default::default());
        AwsRoutes::new(
            Ec2::new(aws_sdk_ec2::Client::from_conf(conf), api),
            TableScope::Id("rtb-1".into()),
        )
    }

    #[test]
    fn targets_come_from_the_provider_id_or_an_instance_named_node() {
        let r = routes();
        let mut node = NodeInfo::named("ip-10-0-0-1.ec2.internal");
        assert!(r.route_target(&node).is_err());
        node.provider_id = Some("aws:///us-east-1a/i-0abc".into());
        assert_eq!(r.route_target(&node).unwrap(), RouteTarget("i-0abc".into()));
        node.provider_id = Some("aws:///us-east-1a/fargate-ip-1".into());
        assert!(r.route_target(&node).is_err());
        let named = NodeInfo::named("i-0def.us-east-1.compute.internal");
        assert_eq!(
            r.route_target(&named).unwrap(),
            RouteTarget("i-0def".into())
        );
    }
}
